//! The persistent index of the memory: it always answers as a fresh build from the note files
//! would, whatever happened to it (changes by memloop, by hand, by several writers at once,
//! derived files lost or damaged, a cold start cut short), and it never reads what is not a note.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use memloop::memory::record::{Note, Record};
use memloop::memory::store::{NewNote, Opening, Store};

const WORDS: &[&str] = &[
    "checkout",
    "vat",
    "rounding",
    "invoice",
    "typst",
    "cache",
    "lock",
    "migration",
    "schema",
    "token",
    "retry",
    "queue",
    "worker",
    "deploy",
    "staging",
    "flag",
    "parser",
    "config",
    "hook",
    "gate",
    "branch",
    "merge",
    "release",
    "binary",
    "symlink",
    "windows",
    "crlf",
];

struct Repo {
    dir: tempfile::TempDir,
}

impl Repo {
    fn new() -> Repo {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join(".git")).unwrap();
        Repo { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn notes(&self) -> PathBuf {
        self.path().join(".memloop/memory/notes")
    }

    /// Writes a note file by hand, as a person or `git pull` would.
    fn write_note(&self, id: &str, content: &str, importance: u8, created: &str) {
        fs::create_dir_all(self.notes()).unwrap();
        let note = Note {
            content: content.to_owned(),
            category: "gotchas".into(),
            importance,
            tags: vec!["hand".into(), "made".into()],
            key: None,
            task_id: None,
            created: created.into(),
            updated: None,
            forgotten: None,
            about: Vec::new(),
            commit: None,
            extra: Vec::new(),
        };
        fs::write(self.notes().join(format!("{id}.md")), note.render()).unwrap();
    }

    fn forget_cache(&self) {
        let _ = fs::remove_dir_all(self.path().join(".memloop/cache"));
    }
}

fn sentence(seed: usize) -> String {
    (0..8)
        .map(|i| WORDS[(seed * 7 + i * (seed % 5 + 1)) % WORDS.len()])
        .collect::<Vec<_>>()
        .join(" ")
}

fn new_note(seed: usize) -> NewNote {
    NewNote {
        content: format!("{} sentinel{seed}", sentence(seed)),
        category: ["decisions", "gotchas", "patterns", "context"][seed % 4].into(),
        importance: (seed % 10 + 1) as u8,
        tags: vec![WORDS[seed % WORDS.len()].into(), "bench".into()],
        task_id: None,
        key: None,
        paths: Vec::new(),
    }
}

/// Every query's answer as (id, score), for comparing two views of the same notes.
fn answers(store: &mut Store) -> Vec<Vec<(String, u64)>> {
    let mut queries: Vec<String> = WORDS.iter().map(|w| (*w).to_owned()).collect();
    queries.push("checkout vat rounding".into());
    queries.push("merge branch release binary".into());
    queries.push("nothing-here-at-all".into());
    queries
        .iter()
        .map(|q| {
            store
                .answer_notes(q, 7)
                .into_iter()
                .map(|f| (f.id, f.score.to_bits()))
                .collect()
        })
        .collect()
}

fn rebuilt(repo: &Repo) -> Store {
    repo.forget_cache();
    Store::open(repo.path()).unwrap()
}

#[test]
fn changes_through_the_delta_and_merges_answer_as_a_fresh_build() {
    let repo = Repo::new();
    let mut store = Store::open(repo.path()).unwrap();
    let mut ids = Vec::new();
    // Past the delta's limit more than once, with forgets and restores between.
    for seed in 0..700 {
        ids.push(store.store_note(new_note(seed)).unwrap());
        if seed % 9 == 0 {
            store.set_forgotten(&ids[seed / 2], true).unwrap();
        }
        if seed % 27 == 0 {
            store.set_forgotten(&ids[seed / 2], false).unwrap();
        }
    }
    let incremental = answers(&mut store);
    let session = memloop::memory::session::index(&store, 2048);
    // Another reader sees the same through the files memloop left.
    let mut reader = Store::open(repo.path()).unwrap();
    assert_eq!(answers(&mut reader), incremental);
    let mut fresh = rebuilt(&repo);
    assert_eq!(answers(&mut fresh), incremental);
    assert_eq!(memloop::memory::session::index(&fresh, 2048), session);
    assert!(incremental.iter().take(27).all(|a| !a.is_empty()));
    assert!(
        incremental.last().unwrap().is_empty(),
        "an unknown word finds nothing"
    );
}

#[test]
fn a_forgotten_note_leaves_search_and_the_session_index_and_comes_back() {
    let repo = Repo::new();
    let mut store = Store::open(repo.path()).unwrap();
    let id = store.store_note(new_note(3)).unwrap();
    let query = "sentinel3";
    assert_eq!(store.answer_notes(query, 5)[0].id, id);
    store.set_forgotten(&id, true).unwrap();
    assert!(store.answer_notes(query, 5).is_empty());
    assert!(
        !memloop::memory::session::index(&store, 2048)
            .text
            .contains(&id)
    );
    store.set_forgotten(&id, false).unwrap();
    assert_eq!(store.answer_notes(query, 5)[0].id, id);
    assert!(
        memloop::memory::session::index(&store, 2048)
            .text
            .contains(&id)
    );
}

#[test]
fn notes_changed_by_hand_are_folded_in() {
    let repo = Repo::new();
    let mut store = Store::open(repo.path()).unwrap();
    let id = store.store_note(new_note(1)).unwrap();
    // Added, rewritten and deleted behind memloop's back (an editor, `git pull`).
    repo.write_note(
        "n-20261201-120000-aaaaaa",
        "Invoices are rendered with typst.",
        8,
        "2026-12-01T12:00:00.000Z",
    );
    fs::remove_file(repo.notes().join(format!("{id}.md"))).unwrap();
    let mut reader = Store::open(repo.path()).unwrap();
    assert_eq!(
        reader.answer_notes("typst invoices", 5)[0].id,
        "n-20261201-120000-aaaaaa"
    );
    assert!(reader.answer_notes("sentinel1", 5).is_empty());
    store.refresh().unwrap();
    assert!(store.answer_notes("sentinel1", 5).is_empty());
    // Rewritten in place: the inode stays, the answer is still the file's text.
    repo.write_note(
        "n-20261201-120000-aaaaaa",
        "Invoices are rendered with typst 0.13 since December.",
        8,
        "2026-12-01T12:00:00.000Z",
    );
    let found = reader.answer_notes("typst invoices", 5);
    assert!(found[0].record.content.contains("0.13"));
}

#[test]
fn damaged_or_foreign_derived_files_are_rebuilt_not_trusted() {
    let repo = Repo::new();
    let mut store = Store::open(repo.path()).unwrap();
    for seed in 0..40 {
        store.store_note(new_note(seed)).unwrap();
    }
    let expected = answers(&mut store);
    let cache = repo.path().join(".memloop/cache");
    let segment = cache.join("notes.seg");
    let delta = cache.join("notes.delta");
    let original = fs::read(&segment).unwrap();
    let damages: Vec<(&Path, Vec<u8>)> = vec![
        (&segment, Vec::new()),
        (&segment, b"not an index at all".to_vec()),
        (&segment, original[..original.len() / 2].to_vec()),
        (&segment, {
            let mut flipped = original.clone();
            for byte in flipped.iter_mut().skip(48).take(64) {
                *byte ^= 0x5a;
            }
            flipped
        }),
        (
            &delta,
            b"{\"segment\":\"0000000000000000\"}\n{\"put\": 3}\n".to_vec(),
        ),
        (&delta, b"garbage\n".to_vec()),
    ];
    for (file, bytes) in damages {
        fs::write(file, &bytes).unwrap();
        let mut reader = Store::open(repo.path()).unwrap();
        assert_eq!(
            answers(&mut reader),
            expected,
            "after damaging {}",
            file.display()
        );
        // Every damage starts from a good index.
        store = rebuilt(&repo);
    }
    assert_eq!(answers(&mut store), expected);
}

#[test]
fn a_segment_damaged_past_its_header_is_rebuilt_by_a_servers_start_and_missing_notes_leave() {
    let repo = Repo::new();
    let mut store = Store::open(repo.path()).unwrap();
    let mut ids = Vec::new();
    for seed in 0..300 {
        ids.push(store.store_note(new_note(seed)).unwrap());
    }
    let expected = answers(&mut store);
    let segment = repo.path().join(".memloop/cache/notes.seg");
    let mut bytes = fs::read(&segment).unwrap();
    // The strings region (ids and lines) starts at the offset in bytes 88..96 of the header:
    // every id there made not UTF-8, the header left whole.
    let strings = u64::from_le_bytes(bytes[88..96].try_into().unwrap()) as usize;
    assert!(strings > 128 && strings < bytes.len());
    for byte in &mut bytes[strings..] {
        *byte = 0xff;
    }
    fs::write(&segment, &bytes).unwrap();
    let server = Opening {
        verify: true,
        deadline: None,
    };
    let mut reader = Store::open_with(repo.path(), server).unwrap();
    assert_eq!(answers(&mut reader), expected);
    assert_eq!(reader.notes.list().unwrap().len(), 300);
    // Notes removed behind memloop's back leave the index when the folder is walked again.
    for id in ids.iter().step_by(2) {
        fs::remove_file(repo.notes().join(format!("{id}.md"))).unwrap();
    }
    let mut reader = Store::open_with(repo.path(), server).unwrap();
    assert_eq!(reader.notes.list().unwrap().len(), 150);
    assert_eq!(answers(&mut reader), answers(&mut rebuilt(&repo)));
}

#[test]
fn a_missing_notes_folder_takes_even_forgotten_notes_out_of_the_index() {
    let repo = Repo::new();
    let mut store = Store::open(repo.path()).unwrap();
    let id = store.store_note(new_note(5)).unwrap();
    store.set_forgotten(&id, true).unwrap();
    assert_eq!(store.notes.list().unwrap().len(), 1);
    assert_eq!(store.notes.count(), 0);
    fs::remove_dir_all(repo.notes()).unwrap();
    let reader = Store::open(repo.path()).unwrap();
    assert!(
        reader.notes.list().unwrap().is_empty(),
        "a forgotten note whose file is gone is still listed"
    );
}

#[test]
fn a_cold_start_cut_short_shows_what_it_read_and_the_next_call_reads_on() {
    let repo = Repo::new();
    for i in 0..300 {
        repo.write_note(
            &format!("n-20261201-{:06}-abcdef", 100_000 + i),
            &format!("Fact number {i} about the checkout."),
            5,
            &format!("2026-12-01T{:02}:{:02}:00.000Z", i / 60 % 24, i % 60),
        );
    }
    let cut = Store::open_with(
        repo.path(),
        Opening {
            verify: false,
            deadline: Some(Instant::now()),
        },
    )
    .unwrap();
    assert!(
        cut.pending > 0,
        "the deadline had passed: nothing could be read in time"
    );
    let text = memloop::memory::session::index(&cut, 2048).text;
    assert!(text.contains("still indexing"), "{text}");
    let whole = Store::open(repo.path()).unwrap();
    assert_eq!(whole.pending, 0);
    assert_eq!(whole.notes.count(), 300);
    let text = memloop::memory::session::index(&whole, 2048).text;
    assert!(!text.contains("still indexing"), "{text}");
    assert!(text.contains("300 notes"), "{text}");
}

#[test]
fn the_session_index_from_short_lists_equals_one_from_every_note() {
    let repo = Repo::new();
    // More notes per importance than the short lists keep, many forgotten among the newest.
    for i in 0..400u32 {
        repo.write_note(
            &format!("n-20261101-{:06}-aaaaaa", 100_000 + i),
            &format!("Note {i}: {}", sentence(i as usize)),
            (i % 3 + 6) as u8,
            &format!("2026-11-{:02}T10:00:00.000Z", i % 28 + 1),
        );
    }
    let mut store = Store::open(repo.path()).unwrap();
    let listed = store.notes.list().unwrap();
    let mut newest: Vec<_> = listed.iter().filter(|(_, m)| m.importance == 8).collect();
    newest.sort_by_key(|(_, meta)| std::cmp::Reverse(meta.at_ms));
    let to_forget: Vec<String> = newest.iter().take(70).map(|(id, _)| id.clone()).collect();
    for id in &to_forget {
        store.set_forgotten(id, true).unwrap();
    }
    for cap in [256, 2048, 16_384] {
        let short = memloop::memory::session::index(&store, cap);
        let fresh = memloop::memory::session::index(&rebuilt(&repo), cap);
        assert_eq!(short, fresh, "cap {cap}");
        assert!(to_forget.iter().all(|id| !short.text.contains(id.as_str())));
        store = Store::open(repo.path()).unwrap();
    }
}

#[test]
fn what_is_not_a_note_is_skipped_and_never_read() {
    let repo = Repo::new();
    repo.write_note(
        "n-20261201-000000-good00",
        "The real note about vat.",
        5,
        "2026-12-01",
    );
    let notes = repo.notes();
    let outside = tempfile::tempdir().unwrap();
    fs::write(
        outside.path().join("secret.md"),
        "---\ncategory: context\nimportance: 9\ntags: []\ncreated: 2026-12-01\n---\nvat secret from outside\n",
    )
    .unwrap();
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(outside.path().join("secret.md"), notes.join("n-out.md"))
            .unwrap();
        std::os::unix::fs::symlink("/dev/zero", notes.join("n-device.md")).unwrap();
        let fifo = notes.join("n-fifo.md");
        assert!(
            Command::new("mkfifo")
                .arg(&fifo)
                .status()
                .unwrap()
                .success()
        );
    }
    fs::create_dir(notes.join("n-folder.md")).unwrap();
    fs::write(notes.join("n-binary.md"), b"---\0\x01\x02 vat").unwrap();
    let huge = fs::File::create(notes.join("n-huge.md")).unwrap();
    huge.set_len(50 << 20).unwrap();
    // A link to a note inside the folder is the note's own business: it is read.
    #[cfg(unix)]
    std::os::unix::fs::symlink("n-20261201-000000-good00.md", notes.join("n-alias.md")).unwrap();

    let started = Instant::now();
    let mut store = Store::open(repo.path()).unwrap();
    assert!(
        started.elapsed().as_secs() < 5,
        "a FIFO or a device held the read"
    );
    let found: Vec<String> = store
        .answer_notes("vat", 10)
        .into_iter()
        .map(|f| f.id)
        .collect();
    assert!(found.contains(&"n-20261201-000000-good00".to_owned()));
    assert!(!found.iter().any(|id| id == "n-out"), "{found:?}");
    let skipped: Vec<String> = store
        .skipped
        .iter()
        .map(|s| s.file.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    for name in ["n-folder.md", "n-binary.md", "n-huge.md"] {
        assert!(skipped.contains(&name.to_owned()), "{name} in {skipped:?}");
    }
    #[cfg(unix)]
    for name in ["n-out.md", "n-device.md", "n-fifo.md"] {
        assert!(skipped.contains(&name.to_owned()), "{name} in {skipped:?}");
    }
    let text = memloop::memory::session::index(&store, 2048).text;
    assert!(!text.contains("secret"), "{text}");
}

#[cfg(unix)]
#[test]
fn a_notes_folder_linked_out_of_the_repository_is_refused() {
    let repo = Repo::new();
    let outside = tempfile::tempdir().unwrap();
    fs::create_dir_all(outside.path().join("notes")).unwrap();
    fs::create_dir_all(repo.path().join(".memloop")).unwrap();
    std::os::unix::fs::symlink(outside.path(), repo.path().join(".memloop/memory")).unwrap();
    let err = Store::open(repo.path()).err().expect("refused");
    assert!(
        format!("{err:#}").contains("outside the repository"),
        "{err:#}"
    );
}

/// Several writers (each its own store, as two agents' servers and `memloop memory forget`
/// are) and readers at once: no note is lost, and the index equals a rebuild from the files.
#[test]
fn concurrent_writers_and_readers_leave_an_index_equal_to_a_rebuild() {
    let repo = Repo::new();
    Store::open(repo.path())
        .unwrap()
        .store_note(new_note(0))
        .unwrap();
    let root = repo.path().to_path_buf();
    let stored: Vec<String> = std::thread::scope(|scope| {
        let writers: Vec<_> = (0..4)
            .map(|w| {
                let root = root.clone();
                scope.spawn(move || {
                    let mut store = Store::open(&root).unwrap();
                    let mut mine = Vec::new();
                    for i in 0..90 {
                        let id = store.store_note(new_note(1000 * (w + 1) + i)).unwrap();
                        if i % 5 == 0 {
                            store.set_forgotten(&id, true).unwrap();
                        }
                        mine.push(id);
                    }
                    mine
                })
            })
            .collect();
        for _ in 0..2 {
            let root = root.clone();
            scope.spawn(move || {
                for _ in 0..40 {
                    let mut store = Store::open(&root).unwrap();
                    let _ = store.answer_notes("checkout vat", 5);
                    let _ = memloop::memory::session::index(&store, 2048);
                }
            });
        }
        writers
            .into_iter()
            .flat_map(|w| w.join().unwrap())
            .collect()
    });
    assert_eq!(stored.len(), 360);
    let mut live = Store::open(repo.path()).unwrap();
    let listed: Vec<String> = live
        .notes
        .list()
        .unwrap()
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    for id in &stored {
        assert!(listed.contains(id), "{id} lost");
        assert!(live.notes.get(id).is_some(), "{id} has no file");
    }
    let incremental = answers(&mut live);
    let session = memloop::memory::session::index(&live, 2048);
    let mut fresh = rebuilt(&repo);
    assert_eq!(answers(&mut fresh), incremental);
    assert_eq!(memloop::memory::session::index(&fresh, 2048), session);
    assert_eq!(fresh.notes.count(), 1 + 360 - 4 * 18);
}

fn git(dir: &Path, args: &[&str]) -> std::process::Output {
    let out = Command::new("git")
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "init.defaultBranch=main",
        ])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success() || args[0] == "merge",
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The notes live in git: two branches that add notes, or forget the same note, merge cleanly.
#[test]
fn branches_that_add_or_forget_the_same_note_merge_without_conflict() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    git(root, &["init", "-q"]);
    let mut store = Store::open(root).unwrap();
    let shared = store.store_note(new_note(1)).unwrap();
    git(root, &["add", "-A"]);
    git(root, &["commit", "-qm", "one note"]);
    let ignored =
        String::from_utf8(git(root, &["status", "--porcelain", "--ignored"]).stdout).unwrap();
    assert!(
        ignored.contains(".memloop/cache/"),
        "the index stays out of git: {ignored}"
    );

    git(root, &["checkout", "-qb", "other"]);
    let mut store = Store::open(root).unwrap();
    store.store_note(new_note(2)).unwrap();
    store.set_forgotten(&shared, true).unwrap();
    git(root, &["add", "-A"]);
    git(root, &["commit", "-qm", "other: add, forget"]);

    git(root, &["checkout", "-q", "main"]);
    // A second later, as on another machine: the forget must still write the same bytes.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let mut store = Store::open(root).unwrap();
    store.store_note(new_note(3)).unwrap();
    store.set_forgotten(&shared, true).unwrap();
    git(root, &["add", "-A"]);
    git(root, &["commit", "-qm", "main: add, forget"]);

    let merged = git(root, &["merge", "-q", "--no-edit", "other"]);
    assert!(
        merged.status.success(),
        "merge conflict: {}{}",
        String::from_utf8_lossy(&merged.stdout),
        String::from_utf8_lossy(&merged.stderr)
    );
    let mut store = Store::open(root).unwrap();
    assert_eq!(
        store.notes.count(),
        2,
        "both added notes, the shared one forgotten"
    );
    assert!(store.answer_notes("sentinel1", 5).is_empty());
    assert_eq!(store.answer_notes("sentinel2", 5).len(), 1);
    assert_eq!(store.answer_notes("sentinel3", 5).len(), 1);
}
