//! What an agent writes into a file for itself (Qwen Code stamps `"$version": 4` into every
//! settings file it loads) does not make a file memloop created the user's: uninstall removes the
//! file when nothing else is left, and keeps it, with the stamp, when the user added something.

mod trees;

use trees::Sandbox;

/// Qwen's stamp, where 0.24.4 puts it when it loads the file memloop wrote.
fn stamped(text: &str) -> String {
    text.replacen("{\n", "{\n  \"$version\": 4,\n", 1)
}

#[test]
fn a_created_qwen_settings_file_goes_with_the_agents_stamp_in_it() {
    let sandbox = Sandbox::empty();
    sandbox.ok(&["init", "--yes", "--agents", "qwen"]);
    let written = sandbox.read(".qwen/settings.json");
    sandbox.write(".qwen/settings.json", &stamped(&written));
    // The stamp is Qwen's: nothing to sync, no drift.
    assert!(sandbox.run(&["diff"]).status.success());
    sandbox.ok(&["uninstall", "--yes"]);
    assert!(!sandbox.exists(".qwen/settings.json"));
    assert!(
        !sandbox.exists(".qwen"),
        "the folder memloop created goes too"
    );
}

#[test]
fn without_memloops_record_the_stamped_file_still_goes() {
    let sandbox = Sandbox::empty();
    sandbox.ok(&["init", "--yes", "--agents", "qwen"]);
    let written = sandbox.read(".qwen/settings.json");
    sandbox.write(".qwen/settings.json", &stamped(&written));
    // Another machine: nothing recorded about the file, it is judged by its bytes.
    sandbox.forget_install();
    sandbox.ok(&["uninstall", "--yes"]);
    assert!(!sandbox.exists(".qwen/settings.json"));
}

#[test]
fn the_users_own_keys_keep_the_file_and_the_stamp() {
    let sandbox = Sandbox::empty();
    sandbox.ok(&["init", "--yes", "--agents", "qwen"]);
    let written = sandbox.read(".qwen/settings.json");
    let edited = stamped(&written).replacen(
        "\"$version\": 4,\n",
        "\"$version\": 4,\n  \"model\": {\"name\": \"qwen3-coder\"},\n",
        1,
    );
    sandbox.write(".qwen/settings.json", &edited);
    sandbox.ok(&["uninstall", "--yes"]);
    assert_eq!(
        sandbox.read(".qwen/settings.json"),
        "{\n  \"$version\": 4,\n  \"model\": {\"name\": \"qwen3-coder\"}\n}\n"
    );
}

#[test]
fn a_file_the_user_had_keeps_its_stamp() {
    let sandbox = Sandbox::empty();
    sandbox.write(".qwen/settings.json", "{\n  \"$version\": 4\n}\n");
    sandbox.ok(&["init", "--yes", "--agents", "qwen"]);
    sandbox.ok(&["uninstall", "--yes"]);
    assert_eq!(
        sandbox.read(".qwen/settings.json"),
        "{\n  \"$version\": 4\n}\n"
    );
}
