//! `cargo xtask man [dir]`: man pages from the CLI definition (clap_mangen): `memloop.1` and one
//! `memloop-<command>.1` per command, written to `dir` (default `target/man`).

use std::path::PathBuf;

pub fn run(args: &[String]) -> anyhow::Result<()> {
    let dir = match args.first() {
        Some(dir) => PathBuf::from(dir),
        None => {
            let workspace = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
            std::env::var_os("CARGO_TARGET_DIR")
                .map_or_else(|| workspace.join("target"), PathBuf::from)
                .join("man")
        }
    };
    std::fs::create_dir_all(&dir)?;
    let command = memloop::cli::command();
    let mut pages = vec![("memloop".to_owned(), command.clone())];
    for sub in command.get_subcommands() {
        let name = format!("memloop-{}", sub.get_name());
        // A leaked name: clap takes `&'static str` without its `string` feature.
        let page_name: &'static str = Box::leak(name.clone().into_boxed_str());
        pages.push((name, sub.clone().name(page_name)));
    }
    for (name, page) in pages {
        let mut out = Vec::new();
        clap_mangen::Man::new(page).render(&mut out)?;
        let path = dir.join(format!("{name}.1"));
        std::fs::write(&path, out)?;
        println!("wrote {}", path.display());
    }
    Ok(())
}
