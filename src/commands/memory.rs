//! `memloop memory`: what the agents remembered, for a person to read and correct. It works on
//! the embedded server's own store (the same files under `.memloop/memory/`, the same write
//! lock), so a running server sees a forget or restore at its next query.
//!
//! Exit codes: 0 done, 1 no note or route has the id, 2 the repository or its config is unusable.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use serde_json::{Value, json};

use crate::config::Config;
use crate::memory::record::{Note, Record, Route, Unreadable, read_all};
use crate::memory::session::{self, session_text};
use crate::memory::stale::{Checker, Stale};
use crate::memory::store::{Change, MEMLOOP_DIR, Store};
use crate::text::{Lines, printable};

#[derive(Debug, clap::Args)]
pub struct MemoryArgs {
    #[command(subcommand)]
    command: MemoryCommand,
    /// Repository whose memory to read [default: the nearest memloop.toml, else .git, above the
    /// working directory]
    #[arg(long, global = true, value_name = "DIR", env = "MEMLOOP_ROOT")]
    root: Option<PathBuf>,
    /// Output format.
    #[arg(long, global = true, value_enum, default_value_t = Format::Table)]
    format: Format,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Format {
    Table,
    Json,
}

#[derive(Debug, clap::Subcommand)]
enum MemoryCommand {
    /// List the notes (newest first), then the routes.
    List {
        /// Forgotten notes too.
        #[arg(long)]
        all: bool,
        /// Only the forgotten notes.
        #[arg(long, conflicts_with = "all")]
        forgotten: bool,
        /// Only the notes whose files changed since they were written (possibly stale).
        #[arg(long)]
        stale: bool,
        /// At most this many notes.
        #[arg(long, value_name = "N")]
        limit: Option<usize>,
    },
    /// Find notes and routes the way context_query does.
    Search {
        /// Keywords, e.g. "spanish vat checkout rounding".
        #[arg(required = true, num_args = 1..)]
        query: Vec<String>,
        /// At most this many notes.
        #[arg(long, value_name = "N", default_value_t = 10)]
        limit: usize,
    },
    /// Show one note or route in full.
    Show { id: String },
    /// Forget a note: it stays on disk, out of every query and index, until restored.
    Forget { id: String },
    /// Bring a forgotten note back.
    Restore { id: String },
    /// Print exactly what a new session is given (the index, or the lookup rule alone).
    Index,
    /// Print exactly what an agent's prompt hook gives for this prompt (the first in a session).
    Recall {
        /// The prompt, as the person would send it.
        #[arg(required = true, num_args = 1..)]
        prompt: Vec<String>,
    },
}

pub fn run(args: MemoryArgs) -> anyhow::Result<ExitCode> {
    let root = crate::memory::repository(args.root, None).map_err(anyhow::Error::msg)?;
    let config = Config::load(&root)?.unwrap_or_default();
    let format = args.format;
    if let MemoryCommand::Index = args.command {
        return index(&root, &config, format);
    }
    if let MemoryCommand::Recall { prompt } = &args.command {
        return recall(&root, &config, format, &prompt.join(" "));
    }
    let server = config.server()?;
    if !server.is_embedded() {
        eprintln!(
            "memloop memory: memloop.toml points the agents at the server {:?}, not the embedded \
             one; this is the embedded store in .memloop/memory/, which they do not read",
            server.name
        );
    }
    let mut store = Store::open(&root)?;
    store.budget = crate::memory::budget::Budget::of(&config.memory);
    let out = match args.command {
        MemoryCommand::List {
            all,
            forgotten,
            stale,
            limit,
        } => {
            // Chosen and ordered from the index; only the notes listed are read.
            let mut chosen: Vec<(String, i64)> = store
                .notes
                .list()?
                .into_iter()
                .filter(|(_, meta)| match (all, forgotten) {
                    (true, _) => true,
                    (_, true) => !meta.searchable,
                    _ => meta.searchable,
                })
                .map(|(id, meta)| (id, meta.at_ms))
                .collect();
            chosen.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
            if !stale {
                chosen.truncate(limit.unwrap_or(usize::MAX));
            }
            let mut checker = store.stale_checker();
            let mut notes: Vec<(String, Note)> = chosen
                .into_iter()
                .filter_map(|(id, _)| store.notes.get(&id).map(|note| (id, note)))
                .filter(|(_, note)| !stale || checker.check(note).is_some())
                .collect();
            notes.truncate(limit.unwrap_or(usize::MAX));
            let routes: Vec<(String, Route)> = if forgotten || stale {
                Vec::new()
            } else {
                store
                    .routes
                    .list()?
                    .into_iter()
                    .filter_map(|(id, _)| store.routes.get(&id).map(|route| (id, route)))
                    .collect()
            };
            let unreadable = unreadable(&root);
            let notes: Vec<(&str, &Note)> = notes.iter().map(|(id, n)| (id.as_str(), n)).collect();
            let routes: Vec<(&str, &Route)> =
                routes.iter().map(|(id, r)| (id.as_str(), r)).collect();
            let mut out = listing(format, &notes, &routes, &mut checker);
            if format == Format::Json {
                let mut answer: Value = serde_json::from_str(&out)?;
                answer["unreadable"] = json!(
                    unreadable
                        .iter()
                        .map(
                            |(file, u)| json!({"file": file, "line": u.line, "column": u.column,
                                                "problem": u.problem, "hint": u.hint})
                        )
                        .collect::<Vec<_>>()
                );
                out = format!("{}\n", serde_json::to_string_pretty(&answer)?);
            }
            for (file, u) in &unreadable {
                eprintln!(
                    "memloop memory: cannot read {file}:{}:{}: {}; {} (agents do not see it \
                     until then; `memloop doctor` checks every note)",
                    u.line, u.column, u.problem, u.hint
                );
            }
            out
        }
        MemoryCommand::Search { query, limit } => {
            let query = query.join(" ");
            let notes = store.answer_notes(&query, limit);
            let routes = store.answer_routes(&query, limit.min(5));
            let notes: Vec<(&str, &Note)> =
                notes.iter().map(|f| (f.id.as_str(), &f.record)).collect();
            let routes: Vec<(&str, &Route)> =
                routes.iter().map(|f| (f.id.as_str(), &f.record)).collect();
            listing(format, &notes, &routes, &mut store.stale_checker())
        }
        MemoryCommand::Show { id } => {
            if let Some(note) = store.notes.get(&id) {
                let stale = store.stale_checker().check(&note);
                show_note(format, &id, &note, stale.as_ref())
            } else if let Some(route) = store.routes.get(&id) {
                show_route(format, &id, &route)
            } else {
                return Ok(unknown(&id));
            }
        }
        MemoryCommand::Forget { id } | MemoryCommand::Restore { id }
            if store.notes.get(&id).is_none() =>
        {
            if store.routes.get(&id).is_some() {
                eprintln!(
                    "memloop memory: {id} is a route, and routes are not forgotten; correct it \
                     with update_route, or delete {}",
                    Store::relative_path::<Route>(&id)
                );
                return Ok(ExitCode::from(super::EXIT_DRIFT));
            }
            return Ok(unknown(&id));
        }
        MemoryCommand::Forget { id } => forget(&mut store, format, &id, true)?,
        MemoryCommand::Restore { id } => forget(&mut store, format, &id, false)?,
        MemoryCommand::Index | MemoryCommand::Recall { .. } => unreachable!("answered above"),
    };
    // JSON escapes what it must and is data; text goes to a terminal.
    match format {
        Format::Json => print!("{out}"),
        Format::Table => print!("{}", printable(&out, Lines::Keep)),
    }
    Ok(ExitCode::SUCCESS)
}

/// The note and route files memloop cannot read, by path relative to the repository.
fn unreadable(root: &std::path::Path) -> Vec<(String, Unreadable)> {
    let memory = root.join(MEMLOOP_DIR).join("memory");
    let notes = read_all::<Note>(&memory.join(Note::FOLDER))
        .into_iter()
        .filter_map(|(id, read)| Some((Store::relative_path::<Note>(&id), read.err()?)));
    let routes = read_all::<Route>(&memory.join(Route::FOLDER))
        .into_iter()
        .filter_map(|(id, read)| Some((Store::relative_path::<Route>(&id), read.err()?)));
    notes.chain(routes).collect()
}

fn unknown(id: &str) -> ExitCode {
    eprintln!(
        "memloop memory: no note or route has the id {id:?}; `memloop memory list --all` shows \
         every id"
    );
    ExitCode::from(super::EXIT_DRIFT)
}

fn index(root: &std::path::Path, config: &Config, format: Format) -> anyhow::Result<ExitCode> {
    let given = session_text(root, config)?;
    match format {
        Format::Json => {
            let answer = json!({
                "source": given.source.as_str(),
                "text": given.text,
                "bytes": given.text.len(),
                "cap": config.memory.index_bytes,
                "shown": given.shown,
                "more": given.more,
            });
            println!("{}", serde_json::to_string_pretty(&answer)?);
        }
        Format::Table => {
            if given.source == session::Source::Off {
                eprintln!(
                    "memloop memory: [memory] session_start = false in memloop.toml; sessions \
                     are given nothing"
                );
            }
            print!("{}", given.text);
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn recall(
    root: &std::path::Path,
    config: &Config,
    format: Format,
    prompt: &str,
) -> anyhow::Result<ExitCode> {
    let why_nothing = if !config.memory.recall {
        Some("[memory] recall = false in memloop.toml; prompts are given nothing")
    } else if !config.server()?.is_embedded() {
        Some("memloop.toml points the agents at another server; prompts are given nothing")
    } else {
        None
    };
    let given = match why_nothing {
        Some(_) => crate::memory::recall::Recall::default(),
        None => {
            let mut store = Store::open(root)?;
            let options = crate::memory::recall::Options {
                cap: config.memory.recall_bytes as usize,
                given: &std::collections::HashSet::new(),
            };
            crate::memory::recall::recall(&mut store, prompt, &options)
        }
    };
    match format {
        Format::Json => {
            let notes: Vec<Value> = given
                .notes
                .iter()
                .map(|n| {
                    json!({"id": n.id, "file": n.file, "relevance": n.relevance, "whole": n.whole})
                })
                .collect();
            let answer = json!({
                "text": given.text,
                "bytes": given.text.len(),
                "cap": config.memory.recall_bytes,
                "threshold": crate::memory::recall::THRESHOLD,
                "notes": notes,
            });
            println!("{}", serde_json::to_string_pretty(&answer)?);
        }
        Format::Table => {
            if let Some(why) = why_nothing {
                eprintln!("memloop memory: {why}");
            } else if given.notes.is_empty() {
                eprintln!(
                    "memloop memory: no note matches this prompt well enough (relevance {} or \
                     more); the agent is given nothing",
                    crate::memory::recall::THRESHOLD
                );
            }
            print!("{}", given.text);
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn forget(store: &mut Store, format: Format, id: &str, forget: bool) -> anyhow::Result<String> {
    let change = store
        .set_forgotten(id, forget)
        .with_context(|| format!("could not change {}", Store::relative_path::<Note>(id)))?;
    let changed = matches!(change, Change::Done);
    Ok(match format {
        Format::Json => format!(
            "{}\n",
            json!({"id": id, "forgotten": forget, "changed": changed})
        ),
        Format::Table => match (forget, changed) {
            (true, true) => format!("forgot {id}; `memloop memory restore {id}` brings it back\n"),
            (true, false) => format!("{id} was already forgotten\n"),
            (false, true) => format!("restored {id}\n"),
            (false, false) => format!("{id} was not forgotten\n"),
        },
    })
}

fn note_json(id: &str, note: &Note, stale: Option<&Stale>) -> Value {
    let mut value = json!({
        "id": id,
        "kind": "note",
        "file": Store::relative_path::<Note>(id),
        "content": note.content,
        "category": note.category,
        "importance": note.importance,
        "tags": note.tags,
        "created": note.created,
        "forgotten": note.forgotten,
    });
    if let Some(task) = &note.task_id {
        value["task_id"] = json!(task);
    }
    if let Some(key) = &note.key {
        value["key"] = json!(key);
    }
    if let Some(updated) = &note.updated {
        value["updated"] = json!(updated);
    }
    if !note.about.is_empty() {
        let paths = note.paths();
        value["paths"] = json!(paths);
        value["commit"] = json!(note.commit);
        value["stale"] = json!(stale.map(Stale::describe));
    }
    value
}

fn route_json(id: &str, route: &Route) -> Value {
    json!({
        "id": id,
        "kind": "route",
        "file": Store::relative_path::<Route>(id),
        "title": route.title,
        "description": route.description,
        "paths": route.paths,
        "created": route.created,
        "updated": route.updated,
    })
}

fn listing(
    format: Format,
    notes: &[(&str, &Note)],
    routes: &[(&str, &Route)],
    checker: &mut Checker<'_>,
) -> String {
    if format == Format::Json {
        let answer = json!({
            "notes": notes
                .iter()
                .map(|(id, n)| note_json(id, n, checker.check(n).as_ref()))
                .collect::<Vec<_>>(),
            "routes": routes.iter().map(|(id, r)| route_json(id, r)).collect::<Vec<_>>(),
        });
        return format!("{}\n", serde_json::to_string_pretty(&answer).expect("JSON"));
    }
    if notes.is_empty() && routes.is_empty() {
        return "no notes or routes\n".to_owned();
    }
    let mut rows: Vec<[String; 5]> = Vec::new();
    for (id, note) in notes {
        let gone = if note.forgotten.is_some() {
            "[forgotten] "
        } else {
            ""
        };
        let stale = if checker.check(note).is_some() {
            "[possibly stale] "
        } else {
            ""
        };
        rows.push([
            (*id).to_owned(),
            note.category.clone(),
            note.importance.to_string(),
            date(&note.created),
            format!("{gone}{stale}{}", session::title(&note.content)),
        ]);
    }
    for (id, route) in routes {
        rows.push([
            (*id).to_owned(),
            "route".to_owned(),
            String::new(),
            date(route.updated.as_deref().unwrap_or(&route.created)),
            format!("{}: {}", route.title, route.paths.join(", ")),
        ]);
    }
    table(["ID", "KIND", "IMP", "DATE", "TEXT"], &rows)
}

/// Columns padded to their widest cell; on a terminal the last one is cut to the width.
fn table(header: [&str; 5], rows: &[[String; 5]]) -> String {
    // A cell is one line of what a note says, shown and never obeyed.
    let rows: Vec<[String; 5]> = rows
        .iter()
        .map(|row| {
            row.clone()
                .map(|cell| printable(&cell, Lines::One).into_owned())
        })
        .collect();
    let rows = rows.as_slice();
    let mut widths = header.map(str::len);
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let room = std::io::stdout().is_terminal().then(|| {
        let columns = std::env::var("COLUMNS")
            .ok()
            .and_then(|c| c.parse::<usize>().ok())
            .unwrap_or(100);
        let used: usize = widths[..4].iter().map(|w| w + 2).sum();
        columns.saturating_sub(used).max(20)
    });
    let mut out = String::new();
    let mut push = |cells: [&str; 5]| {
        let mut line = String::new();
        for (i, cell) in cells.iter().enumerate().take(4) {
            line.push_str(&format!("{cell:<width$}  ", width = widths[i]));
        }
        let last = cells[4];
        match room {
            Some(room) if last.chars().count() > room => {
                line.extend(last.chars().take(room.saturating_sub(1)));
                line.push('…');
            }
            _ => line.push_str(last),
        }
        out.push_str(line.trim_end());
        out.push('\n');
    };
    push(header);
    for row in rows {
        push([&row[0], &row[1], &row[2], &row[3], &row[4]]);
    }
    out
}

fn date(timestamp: &str) -> String {
    timestamp.get(..10).unwrap_or(timestamp).to_owned()
}

fn show_note(format: Format, id: &str, note: &Note, stale: Option<&Stale>) -> String {
    if format == Format::Json {
        return format!(
            "{}\n",
            serde_json::to_string_pretty(&note_json(id, note, stale)).expect("JSON")
        );
    }
    let mut out = format!(
        "id:         {id}\nfile:       {}\ncategory:   {}\nimportance: {}\ntags:       {}\n",
        Store::relative_path::<Note>(id),
        field(&note.category),
        note.importance,
        field(&note.tags.join(", ")),
    );
    if let Some(key) = &note.key {
        out.push_str(&format!("key:        {}\n", field(key)));
    }
    if let Some(task) = &note.task_id {
        out.push_str(&format!("task_id:    {}\n", field(task)));
    }
    out.push_str(&format!("created:    {}\n", field(&note.created)));
    if let Some(at) = &note.updated {
        out.push_str(&format!("updated:    {}\n", field(at)));
    }
    if !note.about.is_empty() {
        let paths = note.paths();
        out.push_str(&format!("about:      {}\n", field(&paths.join(", "))));
    }
    if let Some(commit) = &note.commit {
        out.push_str(&format!("commit:     {}\n", field(commit)));
    }
    if let Some(stale) = stale {
        out.push_str(&format!("stale:      {}\n", field(&stale.describe())));
    }
    if let Some(at) = &note.forgotten {
        out.push_str(&format!(
            "forgotten:  {} (`memloop memory restore {id}` brings it back)\n",
            field(at)
        ));
    }
    out.push_str(&format!("\n{}\n", note.content));
    out
}

/// A one-line field of a note's or route's front matter, as shown: a line break in it cannot
/// start a line of its own.
fn field(value: &str) -> std::borrow::Cow<'_, str> {
    printable(value, Lines::One)
}

fn show_route(format: Format, id: &str, route: &Route) -> String {
    if format == Format::Json {
        return format!(
            "{}\n",
            serde_json::to_string_pretty(&route_json(id, route)).expect("JSON")
        );
    }
    let mut out = format!(
        "id:         {id}\nfile:       {}\ntitle:      {}\npaths:      {}\ncreated:    {}\n",
        Store::relative_path::<Route>(id),
        field(&route.title),
        field(&route.paths.join(", ")),
        field(&route.created),
    );
    if let Some(at) = &route.updated {
        out.push_str(&format!("updated:    {}\n", field(at)));
    }
    out.push_str(&format!("\n{}\n", route.description));
    out
}
