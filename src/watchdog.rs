//! The time budget of one `memloop hook` run. An agent waits for its hooks; a hook that hangs (a
//! stdin nobody closes, a slow disk, a git that never returns) must not hold it. A watchdog
//! thread ends the process with exit 1 when the budget runs out, naming what the run was doing
//! and what the agent goes on without; whoever answers first (the run or the watchdog) is the
//! only one that answers.

use std::sync::Mutex;
use std::time::Duration;

/// The whole of one `memloop hook` run, well under the 15 s the installed hooks allow (10 s
/// in the OpenCode plugin).
pub const BUDGET: Duration = Duration::from_secs(5);

/// What the run is doing, named in the message when the budget runs out.
static PHASE: Mutex<&str> = Mutex::new("starting");
/// Set once the answer is being given: the watchdog then stays quiet.
static ANSWERED: Mutex<bool> = Mutex::new(false);

/// Names what the run does next, for the watchdog's message.
pub fn phase(what: &'static str) {
    *PHASE.lock().unwrap_or_else(|poison| poison.into_inner()) = what;
}

/// Runs `give` unless the watchdog answered already; the two never both answer.
pub fn answer(give: impl FnOnce()) {
    let mut answered = ANSWERED.lock().unwrap_or_else(|poison| poison.into_inner());
    if !*answered {
        *answered = true;
        give();
    }
}

/// The budget: `MEMLOOP_GATE_BUDGET_MS` may shorten it (tests use that), never lengthen it.
pub fn budget() -> Duration {
    std::env::var("MEMLOOP_GATE_BUDGET_MS")
        .ok()
        .and_then(|ms| ms.parse::<u64>().ok())
        .map_or(BUDGET, |ms| Duration::from_millis(ms).min(BUDGET))
}

/// Ends the process with exit 1 once [`budget`] has passed, saying what the run was doing and
/// `consequence` (what the agent goes on without, e.g. "the stop was not blocked"). Writes are
/// torn-safe wherever a hook writes, so stopping at any point loses at most this run's record.
pub fn start(consequence: &'static str) {
    let budget = budget();
    std::thread::spawn(move || {
        std::thread::sleep(budget);
        answer(|| {
            let what = *PHASE.lock().unwrap_or_else(|poison| poison.into_inner());
            eprintln!(
                "memloop hook: gave up after {} ms while {what}; {consequence}",
                budget.as_millis()
            );
            std::process::exit(1);
        });
    });
}
