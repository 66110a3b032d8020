//! The scenarios run in a network namespace of their own in which only loopback is up, so no
//! agent, fake server or memloop can send a packet to any other address: "loopback only" is
//! enforced by the kernel, not only promised. Entered once, after the agents are installed from
//! the registry and memloop is built (both need the network), and before any scenario starts.
//!
//! Where the kernel refuses a namespace (no user namespaces for an unprivileged user, a
//! container without the right), the run goes on and says that loopback is not enforced.

use std::io;

/// Whether the run is isolated.
pub enum Isolation {
    Loopback,
    /// Nothing changed: the kernel would not give this process a namespace, for this reason.
    Unavailable(String),
}

/// The hidden argument on which `cargo xtask e2e` only tries `enter` and says how it went.
pub const PROBE_ARG: &str = "--netns-probe";

/// Moves this process (and every child it starts from now on) into a loopback-only network
/// namespace, once a child process has shown that it can: a namespace entered but left without
/// loopback (a kernel that gives the namespace but not the right to bring `lo` up) would strand
/// the run, and a process cannot go back to the network it left.
pub fn enter() -> Result<Isolation, String> {
    let exe = std::env::current_exe().map_err(|err| format!("finding xtask's binary: {err}"))?;
    let probe = std::process::Command::new(exe)
        .args(["e2e", PROBE_ARG])
        .output()
        .map_err(|err| format!("running the namespace probe: {err}"))?;
    if !probe.status.success() {
        let why = String::from_utf8_lossy(&probe.stdout).trim().to_owned();
        return Ok(Isolation::Unavailable(if why.is_empty() {
            format!("the probe ended with {}", probe.status)
        } else {
            why
        }));
    }
    enter_here()
}

/// The probe: enters the namespace in this (throw-away) process; exit 0 when only loopback is
/// reachable, 1 with the reason on stdout otherwise.
pub fn probe() -> ! {
    match enter_here() {
        Ok(Isolation::Loopback) => std::process::exit(0),
        Ok(Isolation::Unavailable(why)) | Err(why) => {
            println!("{why}");
            std::process::exit(1)
        }
    }
}

fn enter_here() -> Result<Isolation, String> {
    // SAFETY: plain system calls on this process; no memory is shared with the kernel beyond
    // the `ifreq` passed by pointer, which lives across the call.
    unsafe {
        let uid = libc::geteuid();
        let gid = libc::getegid();
        let flags = if uid == 0 {
            libc::CLONE_NEWNET
        } else {
            libc::CLONE_NEWUSER | libc::CLONE_NEWNET
        };
        if libc::unshare(flags) != 0 {
            return Ok(Isolation::Unavailable(format!(
                "unshare: {}",
                io::Error::last_os_error()
            )));
        }
        if uid != 0 {
            // Keep our own ids inside the user namespace, so files the agents write outside it
            // belong to us as before.
            write_proc("/proc/self/setgroups", "deny")?;
            write_proc("/proc/self/uid_map", &format!("{uid} {uid} 1"))?;
            write_proc("/proc/self/gid_map", &format!("{gid} {gid} 1"))?;
        }
        loopback_up()?;
    }
    check_isolated()?;
    Ok(Isolation::Loopback)
}

fn write_proc(path: &str, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|err| format!("writing {path}: {err}"))
}

/// A new network namespace starts with `lo` down: bring it up, as `ip link set lo up` would.
unsafe fn loopback_up() -> Result<(), String> {
    let fail = |what: &str| format!("{what} for lo: {}", io::Error::last_os_error());
    // SAFETY: a zeroed `ifreq` is a valid value; the socket is closed on every path.
    unsafe {
        let sock = libc::socket(libc::AF_INET, libc::SOCK_DGRAM, 0);
        if sock < 0 {
            return Err(fail("socket"));
        }
        let mut req: libc::ifreq = std::mem::zeroed();
        for (slot, byte) in req.ifr_name.iter_mut().zip(b"lo") {
            *slot = *byte as libc::c_char;
        }
        let result = if libc::ioctl(sock, libc::SIOCGIFFLAGS, &mut req) != 0 {
            Err(fail("SIOCGIFFLAGS"))
        } else {
            req.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
            if libc::ioctl(sock, libc::SIOCSIFFLAGS, &req) != 0 {
                Err(fail("SIOCSIFFLAGS"))
            } else {
                Ok(())
            }
        };
        libc::close(sock);
        result
    }
}

/// Proof the namespace is what it claims: loopback answers, and a documentation address
/// (TEST-NET-3, never routed) has no route. A UDP connect only looks the route up; nothing is sent.
fn check_isolated() -> Result<(), String> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")
        .map_err(|err| format!("loopback is not usable in the namespace: {err}"))?;
    let port = listener.local_addr().map_err(|e| e.to_string())?.port();
    std::net::TcpStream::connect(("127.0.0.1", port))
        .map_err(|err| format!("loopback does not answer in the namespace: {err}"))?;
    let probe = std::net::UdpSocket::bind("0.0.0.0:0").map_err(|e| e.to_string())?;
    match probe.connect("203.0.113.1:9") {
        Err(err) if err.raw_os_error() == Some(libc::ENETUNREACH) => Ok(()),
        Err(err) => Err(format!(
            "203.0.113.1 is refused with {err}, not 'network unreachable'"
        )),
        Ok(()) => Err("the namespace still has a route to 203.0.113.1".into()),
    }
}
