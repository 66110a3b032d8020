//! The seven tools: what the model reads about them, and what each call does.
//!
//! The names match what the rules and the Stop gate count (`memory_store`, `context_query`,
//! `route_query`), so a team can switch to a hosted server without changing anything else.

use std::sync::Arc;

use rmcp::model::{CallToolResult, ContentBlock, JsonObject, Tool, ToolAnnotations};
use serde_json::{Value, json};

use anyhow::Context as _;

use super::args::Args;
use crate::memory::budget::Budget;
use crate::memory::record::{CATEGORIES, Note, Route, secret_in};
use crate::memory::search::matched_well;
use crate::memory::stale::MAX_PATHS;
use crate::memory::store::{Change, NewNote, RouteFields, Store, Stored};

/// A note holds one fact and its reason; past this it is several notes or a document.
pub const NOTE_LIMIT: usize = 4000;
const ROUTE_TEXT_LIMIT: usize = 1000;
const TITLE_LIMIT: usize = 120;
const PATH_LIMIT: usize = 300;
const QUERY_LIMIT: usize = 1000;
const KEY_LIMIT: usize = 80;
const DEFAULT_RESULTS: i64 = 5;
const MAX_RESULTS: i64 = 20;
/// Routes that come along with a `context_query`: where to look next, not a second result list.
const ROUTES_WITH_CONTEXT: usize = 3;

pub fn list() -> Vec<Tool> {
    let tool = |name: &'static str, description: &'static str, schema: Value, read_only: bool| {
        let Value::Object(schema) = schema else {
            unreachable!("tool schemas are objects")
        };
        Tool::new(name, description, Arc::new(schema)).with_annotations(
            ToolAnnotations::new()
                .read_only(read_only)
                .destructive(false)
                .open_world(false),
        )
    };
    vec![
        tool(
            "context_query",
            "Look up the memory store before exploring or working on anything you don't already \
             know. Returns the best notes (with a relevance from 0 to 1) and the routes to the \
             files involved; a hint says when nothing matched well.",
            json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "Keywords of the task, e.g. \"spanish vat checkout rounding\"."},
                    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_RESULTS, "description": "How many notes at most (default 5)."}
                },
                "required": ["query"],
                "additionalProperties": false
            }),
            true,
        ),
        tool(
            "memory_store",
            "After every action, store what you learned and why: one fact and its reason per \
             note. Returns the note's id. Storing what a note already says updates that note; \
             to correct a note, store under its key.",
            json!({
                "type": "object",
                "properties": {
                    "content": {"type": "string", "maxLength": NOTE_LIMIT, "description": "The fact and why it matters, so the next session can act on it without asking."},
                    "category": {"type": "string", "enum": CATEGORIES, "description": "decisions: what was chosen and why; gotchas: traps and their fix; patterns: how things are done here; context: background facts."},
                    "importance": {"type": "integer", "minimum": 1, "maximum": 10, "description": "How much the next session loses if it misses this note. Most notes are 4 to 6."},
                    "tags": {"type": "array", "items": {"type": "string"}, "minItems": 2, "maxItems": 5, "description": "Two to five short keywords a later query would use."},
                    "task_id": {"type": "string", "description": "The task or issue this came from, if any."},
                    "key": {"type": "string", "maxLength": KEY_LIMIT, "description": "What the note is about in a few words, e.g. \"vat-rounding\". Storing under a key that a note already has replaces that note: use it to correct or refine a fact."},
                    "paths": {"type": "array", "items": {"type": "string"}, "maxItems": MAX_PATHS, "description": "Files or folders the note is about, relative to the repository root (paths the content names are found without this). When they change, the note is shown as possibly stale."}
                },
                "required": ["content", "category", "importance", "tags"],
                "additionalProperties": false
            }),
            false,
        ),
        tool(
            "memory_forget",
            "Forget an outdated note by id, after storing the note that replaces it. Forgotten \
             notes never answer a query; memory_restore undoes it.",
            id_schema("The note's id, from memory_store or context_query."),
            false,
        ),
        tool(
            "memory_restore",
            "Bring back a note that was forgotten by mistake.",
            id_schema("The forgotten note's id."),
            false,
        ),
        tool(
            "route_query",
            "Find where something lives (files and folders) before searching the tree.",
            json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "What you are looking for, e.g. \"vat rounding\"."},
                    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_RESULTS, "description": "How many routes at most (default 5)."}
                },
                "required": ["query"],
                "additionalProperties": false
            }),
            true,
        ),
        tool(
            "create_route",
            "After exploring the code, record where something lives so the next session goes \
             straight there.",
            json!({
                "type": "object",
                "properties": route_properties(),
                "required": ["title", "description", "paths"],
                "additionalProperties": false
            }),
            false,
        ),
        tool(
            "update_route",
            "Correct a route whose paths or description went stale; pass only what changes.",
            json!({
                "type": "object",
                "properties": {
                    "id": {"type": "string", "description": "The route's id, from create_route or route_query."},
                    "title": route_properties()["title"],
                    "description": route_properties()["description"],
                    "paths": route_properties()["paths"]
                },
                "required": ["id"],
                "additionalProperties": false
            }),
            false,
        ),
    ]
}

fn id_schema(description: &str) -> Value {
    json!({
        "type": "object",
        "properties": {"id": {"type": "string", "description": description}},
        "required": ["id"],
        "additionalProperties": false
    })
}

fn route_properties() -> Value {
    json!({
        "title": {"type": "string", "maxLength": TITLE_LIMIT, "description": "A few words, e.g. \"VAT rounding\"."},
        "description": {"type": "string", "maxLength": ROUTE_TEXT_LIMIT, "description": "One line saying what is where, e.g. \"VAT rounding lives in shop/checkout/tax.py\"."},
        "paths": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 20, "description": "Files or folders, relative to the repository root."}
    })
}

pub fn is_known(name: &str) -> bool {
    matches!(
        name,
        "context_query"
            | "memory_store"
            | "memory_forget"
            | "memory_restore"
            | "route_query"
            | "create_route"
            | "update_route"
    )
}

/// Runs one known tool. `Err` is a message for the model; it becomes a tool error.
pub fn call(store: &mut Store, name: &str, args: &JsonObject) -> Result<Value, String> {
    let failed = |err: anyhow::Error| format!("{name}: {err:#}");
    match name {
        "context_query" => {
            let (query, limit) = query_args(args, name)?;
            store.refresh().map_err(failed)?;
            let found = store.answer_notes(&query, limit);
            let best = found.first().map_or(0.0, |f| f.relevance);
            let routes: Vec<Value> = store
                .answer_routes(&query, ROUTES_WITH_CONTEXT)
                .iter()
                .map(|found| route_json(&found.id, &found.record))
                .collect();
            let mut stale = store.stale_checker();
            let notes: Vec<Value> = found
                .iter()
                .map(|found| {
                    let mut note = note_json(&found.id, &found.record);
                    note["relevance"] = json!((found.relevance * 100.0).round() / 100.0);
                    if let Some(stale) = stale.check(&found.record) {
                        note["stale"] = json!(stale.describe());
                    }
                    note
                })
                .collect();
            let mut answer = json!({"notes": notes, "routes": routes});
            if notes.is_empty() {
                answer["hint"] = json!(
                    "No stored note matches. Once you have worked it out, memory_store what you \
                     learned and why."
                );
            } else if !matched_well(best) {
                answer["hint"] = json!(format!(
                    "Nothing matched well (best relevance {best:.2} of 1): these notes share few \
                     of the query's words and are likely about something else. Try other words; \
                     once you have worked it out, memory_store what you learned and why."
                ));
            }
            Ok(answer)
        }
        "route_query" => {
            let (query, limit) = query_args(args, name)?;
            store.refresh().map_err(failed)?;
            let routes: Vec<Value> = store
                .answer_routes(&query, limit)
                .iter()
                .map(|found| route_json(&found.id, &found.record))
                .collect();
            Ok(json!({"routes": routes}))
        }
        "memory_store" => {
            let new = store_args(args)?;
            let texts = [new.content.as_str()]
                .into_iter()
                .chain(new.tags.iter().map(String::as_str))
                .chain(new.task_id.as_deref())
                .chain(new.key.as_deref());
            if let Some(problem) = secret_in(texts) {
                return Err(secret_refused(name, &problem));
            }
            store.budget = budget(store).map_err(failed)?;
            let key = new.key.clone();
            let stored = store.store(new).map_err(failed)?;
            let id = stored.id();
            let mut answer = json!({"id": id, "file": Store::relative_path::<Note>(id)});
            match &stored {
                Stored::Added(_) => {}
                Stored::Merged(_) => {
                    answer["updated"] = json!(id);
                    answer["note"] = json!(format!(
                        "The note {id} already said this: it now holds your text, and no second \
                         note was added."
                    ));
                }
                Stored::Replaced(_) => {
                    answer["replaced"] = json!(id);
                    answer["note"] = json!(format!(
                        "The note {id} under the key {:?} said something else: your text \
                         replaced it (the old text stays in git history).",
                        key.unwrap_or_default()
                    ));
                }
            }
            Ok(answer)
        }
        "memory_forget" | "memory_restore" => {
            let id = id_arg(args, name)?;
            let forget = name == "memory_forget";
            store.budget = budget(store).map_err(failed)?;
            let change = store.set_forgotten(&id, forget).map_err(failed)?;
            let mut answer = json!({"id": id, "forgotten": forget});
            if let Change::AlreadyThatWay = change {
                answer["note"] = json!(if forget {
                    "it was already forgotten"
                } else {
                    "it was not forgotten"
                });
            }
            Ok(answer)
        }
        "create_route" => {
            let mut a = Args::new(args, &["title", "description", "paths"]);
            let fields = route_args(&mut a, true);
            a.finish(name)?;
            refuse_secrets(name, &fields)?;
            let id = store
                .create_route(
                    fields.title.unwrap_or_default(),
                    fields.description.unwrap_or_default(),
                    fields.paths.unwrap_or_default(),
                )
                .map_err(failed)?;
            Ok(json!({"id": id, "file": Store::relative_path::<Route>(&id)}))
        }
        "update_route" => {
            let mut a = Args::new(args, &["id", "title", "description", "paths"]);
            let id = a.text("id", true, 100, true);
            let fields = route_args(&mut a, false);
            if fields.title.is_none()
                && fields.description.is_none()
                && fields.paths.is_none()
                && !["title", "description", "paths"].iter().any(|k| a.has(k))
            {
                a.problem("give at least one of title, description, paths".into());
            }
            a.finish(name)?;
            refuse_secrets(name, &fields)?;
            let id = id.unwrap_or_default();
            let route = store.update_route(&id, fields).map_err(failed)?;
            Ok(json!({"id": id, "route": route_json(&id, &route)}))
        }
        _ => Err(format!("{name}: no such tool")),
    }
}

/// The repository's `[memory]` limits, read at each write: a person who raises them need not
/// restart the server.
fn budget(store: &Store) -> anyhow::Result<Budget> {
    let config = crate::config::Config::load(store.root())
        .context("nothing was stored: memloop.toml, which sets the notes' budget, is unusable")?
        .unwrap_or_default();
    Ok(Budget::of(&config.memory))
}

/// Notes and routes are committed and read by every agent that queries the memory: a credential
/// in one is refused before anything is written.
fn secret_refused(tool: &str, problem: &str) -> String {
    format!(
        "{tool}: refused, nothing was stored: the text holds {problem}, and notes are committed \
         to the repository and read by every agent. Store where the secret lives instead (the \
         variable's or the vault entry's name), never its value, and call {tool} again."
    )
}

fn refuse_secrets(tool: &str, fields: &RouteFields) -> Result<(), String> {
    let texts = [fields.title.as_deref(), fields.description.as_deref()]
        .into_iter()
        .flatten()
        .chain(fields.paths.iter().flatten().map(String::as_str));
    match secret_in(texts) {
        Some(problem) => Err(secret_refused(tool, &problem)),
        None => Ok(()),
    }
}

fn query_args(args: &JsonObject, tool: &str) -> Result<(String, usize), String> {
    let mut a = Args::new(args, &["query", "limit"]);
    let query = a.text("query", true, QUERY_LIMIT, false);
    let limit = a.integer("limit", false, 1, MAX_RESULTS, "");
    a.finish(tool)?;
    Ok((
        query.unwrap_or_default(),
        limit.unwrap_or(DEFAULT_RESULTS) as usize,
    ))
}

fn id_arg(args: &JsonObject, tool: &str) -> Result<String, String> {
    let mut a = Args::new(args, &["id"]);
    let id = a.text("id", true, 100, true);
    a.finish(tool)?;
    Ok(id.unwrap_or_default())
}

fn store_args(args: &JsonObject) -> Result<NewNote, String> {
    let mut a = Args::new(
        args,
        &[
            "content",
            "category",
            "importance",
            "tags",
            "task_id",
            "key",
            "paths",
        ],
    );
    let content = a.text("content", true, NOTE_LIMIT, false);
    let category = a.text("category", true, 40, true).and_then(|given| {
        let found = category(&given);
        if found.is_none() {
            a.problem(format!(
                "category: use one of {}, got {given:?}",
                CATEGORIES.join(", ")
            ));
        }
        found
    });
    let importance = a.integer(
        "importance",
        true,
        1,
        10,
        " (how much the next session loses if it misses this; most notes are 4 to 6)",
    );
    let tags = a.list("tags", true, (2, 5), 40, "tags");
    let task_id = a.text("task_id", false, 100, true);
    let key = a.text("key", false, KEY_LIMIT, true);
    if let Some(given) = &key
        && !given.chars().any(char::is_alphanumeric)
    {
        a.problem(format!(
            "key: {given:?} has no letter or digit; give a few words, e.g. \"vat-rounding\""
        ));
    }
    let paths = a.list("paths", false, (0, MAX_PATHS), PATH_LIMIT, "paths");
    a.finish("memory_store")?;
    Ok(NewNote {
        content: content.unwrap_or_default(),
        category: category.unwrap_or_default(),
        importance: importance.unwrap_or_default() as u8,
        tags: tags.unwrap_or_default(),
        task_id,
        key,
        paths: paths.unwrap_or_default(),
    })
}

/// The canonical category for what the model wrote: any case, singular or plural.
fn category(given: &str) -> Option<String> {
    let given = given.to_lowercase();
    CATEGORIES
        .iter()
        .find(|c| given == **c || c.strip_suffix('s') == Some(given.as_str()))
        .map(|c| (*c).to_owned())
}

fn route_args(a: &mut Args<'_>, required: bool) -> RouteFields {
    let title = a.text("title", required, TITLE_LIMIT, true);
    let description = a.text("description", required, ROUTE_TEXT_LIMIT, false);
    let paths = a
        .list("paths", required, (1, 20), PATH_LIMIT, "paths")
        .and_then(|paths| {
            let mut clean = Vec::new();
            for path in paths {
                let path = path.strip_prefix("./").unwrap_or(&path).to_owned();
                let escapes = path.split(['/', '\\']).any(|part| part == "..");
                let absolute =
                    path.starts_with(['/', '\\', '~']) || path.as_bytes().get(1) == Some(&b':');
                if escapes || absolute {
                    a.problem(format!(
                        "paths: give paths relative to the repository root, got {path:?}"
                    ));
                    return None;
                }
                clean.push(path);
            }
            Some(clean)
        });
    RouteFields {
        title,
        description,
        paths,
    }
}

fn note_json(id: &str, note: &Note) -> Value {
    let mut value = json!({
        "id": id,
        "content": note.content,
        "category": note.category,
        "importance": note.importance,
        "tags": note.tags,
        "created": note.created,
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
    }
    value
}

fn route_json(id: &str, route: &Route) -> Value {
    json!({
        "id": id,
        "title": route.title,
        "description": route.description,
        "paths": route.paths,
    })
}

/// What the client receives: the JSON as text (what most agents show the model) and as
/// structured content.
pub fn result(outcome: Result<Value, String>) -> CallToolResult {
    match outcome {
        Ok(value) => CallToolResult::structured(value),
        Err(message) => CallToolResult::error(vec![ContentBlock::text(message)]),
    }
}
