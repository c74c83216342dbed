//! scripts/demo's client, host-demo, against `host run` on the example plugins: the story
//! (readable steps, the summary) and the raw transcript.

use std::path::Path;
use std::process::{Command, Output, Stdio};

fn demo(plugins: &Path, root: &Path, log: &Path, raw: bool) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_host-demo"));
    if raw {
        command.arg("--raw");
    }
    command
        .arg("--log")
        .arg(log)
        .arg("--")
        .arg(env!("CARGO_BIN_EXE_host"))
        .args(["run", "--plugin-files", "read", "--plugins"])
        .arg(plugins)
        .arg("--root")
        .arg(root)
        .arg("--cache-dir")
        .arg(plugins.join("../cache"))
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .output()
        .expect("run host-demo")
}

#[test]
fn the_demo_tells_the_story_and_keeps_the_log_apart() {
    let dir = tempfile::tempdir().unwrap();
    let (plugins, root) = (dir.path().join("dist"), dir.path().join("root"));
    std::fs::create_dir_all(&plugins).unwrap();
    std::fs::create_dir_all(&root).unwrap();
    toolhost_tests::install(&plugins, &["greet", "divide", "wordcount"]).unwrap();
    std::fs::write(root.join("notes.md"), "one two\nthree\n").unwrap();
    let log = dir.path().join("host.log");

    let output = demo(&plugins, &root, &log, false);
    let story = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{story}");
    assert!(output.stderr.is_empty(), "the host's log goes to the file");
    for expected in [
        "[3/7] a plugin tool: greet.wasm, a Rust WebAssembly component in the sandbox\n  sent:     greet {\"name\":\"Ada\"}\n  received: Hello, Ada!\n",
        "  sent:     divide {\"by\":0}\n  error:    divide: the tool crashed: panicked at divide/src/lib.rs:20:9: division by zero.",
        "  tools listed:     12 (9 built-in, 3 from plugins)\n",
        "  calls made:       5 (4 answered, 1 error result: divide)\n",
        "  panic contained:  yes",
        "  still serving:    yes",
    ] {
        assert!(story.contains(expected), "{expected:?} not in:\n{story}");
    }
    // No raw JSON-RPC in the story, and no line longer than a screen's worth.
    assert!(!story.contains("jsonrpc"), "{story}");
    assert!(
        story.lines().all(|line| line.chars().count() <= 500),
        "{story}"
    );
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(logged.contains("plugin greet loaded"), "{logged}");

    // --raw: the transcript, every line a JSON-RPC message.
    let output = demo(&plugins, &root, &log, true);
    assert_eq!(output.status.code(), Some(0));
    let transcript = String::from_utf8_lossy(&output.stdout);
    let lines: Vec<&str> = transcript.lines().collect();
    assert_eq!(lines.iter().filter(|l| l.starts_with("> ")).count(), 8);
    assert_eq!(lines.iter().filter(|l| l.starts_with("< ")).count(), 7);
    for line in lines {
        let message: serde_json::Value = serde_json::from_str(&line[2..]).unwrap();
        assert_eq!(message["jsonrpc"], "2.0");
    }
}
