//! memloop's own two tools run without a question in Claude Code (`permissions.allow` in
//! `.claude/settings.json`), Gemini CLI (`tools.allowed` in `.gemini/settings.json`) and Qwen
//! Code (`permissions.allow` in `.qwen/settings.json`): owned entries that sync writes, diff and
//! doctor check,
//! `[memory] approve_tools = false` takes back, and uninstall removes. Nothing else is approved.

mod trees;

use trees::Sandbox;

const ALLOW: &str = r#""allow": ["mcp__memory__context_query", "mcp__memory__memory_store"]"#;

fn allow_list(sandbox: &Sandbox) -> Vec<String> {
    let settings: serde_json::Value =
        serde_json::from_str(&sandbox.read(".claude/settings.json")).unwrap();
    settings["permissions"]["allow"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .map(|i| i.as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn exactly_the_two_tools_of_memloops_server_are_approved() {
    let sandbox = Sandbox::empty();
    sandbox.ok(&["init", "--yes", "--agents", "claude"]);
    assert_eq!(
        allow_list(&sandbox),
        ["mcp__memory__context_query", "mcp__memory__memory_store"]
    );
    assert!(sandbox.read(".claude/settings.json").contains(ALLOW));
    assert_eq!(sandbox.run(&["diff"]).status.code(), Some(0));
}

#[test]
fn the_approvals_follow_the_servers_name() {
    let sandbox = Sandbox::empty();
    sandbox.ok(&[
        "init",
        "--yes",
        "--agents",
        "claude",
        "--server-name",
        "notes",
    ]);
    assert_eq!(
        allow_list(&sandbox),
        ["mcp__notes__context_query", "mcp__notes__memory_store"]
    );
}

#[test]
fn a_server_that_is_not_memloops_own_gets_no_approval() {
    let sandbox = Sandbox::empty();
    sandbox.ok(&[
        "init",
        "--yes",
        "--agents",
        "claude",
        "--url",
        "https://memory.example.test/mcp",
    ]);
    assert!(
        allow_list(&sandbox).is_empty(),
        "{}",
        sandbox.read(".claude/settings.json")
    );
}

#[test]
fn approve_tools_false_takes_them_back_and_keeps_the_users_own() {
    let sandbox = Sandbox::empty();
    sandbox.write(
        ".claude/settings.json",
        "{\n  \"permissions\": {\n    \"allow\": [\"Bash(ls)\"]\n  }\n}\n",
    );
    sandbox.ok(&["init", "--yes", "--agents", "claude"]);
    assert_eq!(
        allow_list(&sandbox),
        [
            "Bash(ls)",
            "mcp__memory__context_query",
            "mcp__memory__memory_store"
        ]
    );

    sandbox.set_config("memory", "approve_tools", "false");
    let diff = sandbox.run(&["diff"]);
    assert_eq!(diff.status.code(), Some(1), "diff shows the drift");
    let shown = String::from_utf8_lossy(&diff.stdout);
    assert!(shown.contains("-    \"allow\": [\"Bash(ls)\", \"mcp__memory__context_query\", \"mcp__memory__memory_store\"]"), "{shown}");
    let doctor = sandbox.run(&["doctor", "--format", "json"]);
    let report = String::from_utf8_lossy(&doctor.stdout);
    assert!(report.contains("mcp__memory__memory_store"), "{report}");

    sandbox.ok(&["sync"]);
    assert_eq!(allow_list(&sandbox), ["Bash(ls)"]);
    assert_eq!(sandbox.run(&["diff"]).status.code(), Some(0));
}

#[test]
fn uninstall_removes_them_even_on_another_machine() {
    let sandbox = Sandbox::empty();
    sandbox.write(
        ".claude/settings.json",
        "{\n  \"permissions\": {\n    \"allow\": [\"Bash(ls)\"]\n  }\n}\n",
    );
    sandbox.ok(&["init", "--yes", "--agents", "claude"]);
    sandbox.forget_install();
    sandbox.ok(&["uninstall", "--yes"]);
    // Nothing tells memloop's approvals from a person's there but their names: only memloop's
    // server has these tools, so they go; the person's own rule stays.
    assert_eq!(allow_list(&sandbox), ["Bash(ls)"]);
}

#[test]
fn gemini_gets_the_same_two_under_its_names_and_gives_them_back() {
    let sandbox = Sandbox::empty();
    sandbox.ok(&["init", "--yes", "--agents", "gemini"]);
    let settings: serde_json::Value = jsonc_value(&sandbox.read(".gemini/settings.json"));
    assert_eq!(
        settings["tools"]["allowed"],
        serde_json::json!(["mcp_memory_context_query", "mcp_memory_memory_store"])
    );
    assert!(
        settings["mcpServers"]["memory"].get("trust").is_none(),
        "never the whole server"
    );
    sandbox.set_config("memory", "approve_tools", "false");
    sandbox.ok(&["sync"]);
    let settings = jsonc_value(&sandbox.read(".gemini/settings.json"));
    assert!(settings.get("tools").is_none(), "{settings}");
}

#[test]
fn qwen_gets_the_same_two_as_its_own_always_allow_rules_and_gives_them_back() {
    let sandbox = Sandbox::empty();
    sandbox.write(
        ".qwen/settings.json",
        "{\n  // mine\n  \"permissions\": {\"allow\": [\"run_shell_command(git status)\"]}\n}\n",
    );
    sandbox.ok(&["init", "--yes", "--agents", "qwen"]);
    let settings = jsonc_value(&strip_line_comments(&sandbox.read(".qwen/settings.json")));
    assert_eq!(
        settings["permissions"]["allow"],
        serde_json::json!([
            "run_shell_command(git status)",
            "mcp__memory__context_query",
            "mcp__memory__memory_store"
        ])
    );
    assert!(
        settings["mcpServers"]["memory"].get("trust").is_none(),
        "never the whole server"
    );
    assert_eq!(sandbox.run(&["diff"]).status.code(), Some(0));

    sandbox.set_config("memory", "approve_tools", "false");
    let diff = sandbox.run(&["diff"]);
    assert_eq!(diff.status.code(), Some(1), "diff shows the drift");
    sandbox.ok(&["sync"]);
    let settings = jsonc_value(&strip_line_comments(&sandbox.read(".qwen/settings.json")));
    assert_eq!(
        settings["permissions"]["allow"],
        serde_json::json!(["run_shell_command(git status)"])
    );

    sandbox.set_config("memory", "approve_tools", "true");
    sandbox.ok(&["sync"]);
    sandbox.forget_install();
    sandbox.ok(&["uninstall", "--yes"]);
    let text = sandbox.read(".qwen/settings.json");
    assert!(text.contains("// mine"), "{text}");
    let settings = jsonc_value(&strip_line_comments(&text));
    assert_eq!(
        settings["permissions"]["allow"],
        serde_json::json!(["run_shell_command(git status)"]),
        "uninstall takes back exactly memloop's two rules"
    );
}

/// The text without `//` comment lines (memloop keeps the person's comments; serde_json reads none).
fn strip_line_comments(text: &str) -> String {
    text.lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `.gemini/settings.json` as a value (memloop writes it without comments).
fn jsonc_value(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap()
}
