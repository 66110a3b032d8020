//! The memory's notes and routes as committed files (`.memloop/memory/`): people edit them by
//! hand and review them in pull requests, so one that memloop cannot read is an error here (the
//! server would skip it, and the agents would never see it), reported at `file:line:col` with
//! what to do. A note holding what looks like a credential is a warning: it is in the
//! repository's history already, and every agent that queries the memory reads it.

use std::path::Path;

use super::{Doctor, Finding, Group};
use crate::memory::record::{Note, Record, Route, read_all};
use crate::memory::store::{MEMLOOP_DIR, Store};

const CHECK: &str = "notes";
const SECRETS: &str = "note-secrets";

pub fn check(d: &mut Doctor) {
    let root = d.repo.root.clone();
    let mut read = (0, 0);
    let mut broken = 0;
    let mut secrets = 0;
    read.0 = each::<Note>(d, &root, &mut broken, &mut secrets, |note| note.secret());
    read.1 = each::<Route>(d, &root, &mut broken, &mut secrets, |route| route.secret());
    if broken == 0 {
        d.push(
            Finding::ok(
                Group::Memloop,
                CHECK,
                format!("{} notes and {} routes read", read.0, read.1),
            )
            .file(format!("{MEMLOOP_DIR}/memory")),
        );
    }
    if secrets == 0 {
        d.push(Finding::ok(
            Group::Memloop,
            SECRETS,
            "no note or route holds what looks like a credential",
        ));
    }
}

/// Reads every record of one kind; returns how many were read.
fn each<T: Record>(
    d: &mut Doctor,
    root: &Path,
    broken: &mut usize,
    secrets: &mut usize,
    secret: impl Fn(&T) -> Option<String>,
) -> usize {
    let dir = root.join(MEMLOOP_DIR).join("memory").join(T::FOLDER);
    let mut read = 0;
    for (id, parsed) in read_all::<T>(&dir) {
        let file = Store::relative_path::<T>(&id);
        match parsed {
            Ok(record) => {
                read += 1;
                if let Some(problem) = secret(&record) {
                    *secrets += 1;
                    d.push(
                        Finding::warning(
                            Group::Memloop,
                            SECRETS,
                            format!(
                                "this {} holds {problem}: it is committed, and every agent that \
                                 queries the memory reads it",
                                T::KIND
                            ),
                        )
                        .file(&file)
                        .fix(
                            "rotate the credential, then remove it from the file (keep where it \
                             lives, e.g. the variable's name, not its value); it stays in git \
                             history until that is rewritten",
                        ),
                    );
                }
            }
            Err(unreadable) => {
                *broken += 1;
                d.push(
                    Finding::error(
                        Group::Memloop,
                        CHECK,
                        format!(
                            "memloop cannot read this {}: {}; the server skips it, so no agent \
                             sees it",
                            T::KIND,
                            unreadable.problem
                        ),
                    )
                    .at_column(&file, unreadable.line, unreadable.column)
                    .fix(unreadable.hint),
                );
            }
        }
    }
    read
}
