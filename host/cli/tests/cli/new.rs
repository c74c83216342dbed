//! End to end, the plugin author's journey: `host new` a project outside the repository,
//! depending on the SDK as `cargo package -p toolhost-sdk` packs it (what an outside crate
//! gets from crates.io or a copy), then `cargo test`, `./build`, and the host loads and
//! calls the component (`host tools`, `host call`, `host run`).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::{json, Value};

fn cargo() -> Command {
    let mut command = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    // The outer `cargo test`'s settings are not the project's.
    for var in [
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "CARGO_BUILD_TARGET",
        "CARGO_TARGET_DIR",
        "CARGO_MAKEFLAGS",
        "MAKEFLAGS",
    ] {
        command.env_remove(var);
    }
    command
}

fn host() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_host"));
    command.env_remove("RUST_LOG");
    command
}

#[track_caller]
fn succeed(command: &mut Command) -> Output {
    let output = command.stdin(Stdio::null()).output().expect("run");
    assert!(
        output.status.success(),
        "{command:?} failed ({:?}):\n{}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// `cargo package -p toolhost-sdk`, unpacked: the SDK as an outside crate sees it (no
/// `../wit`, no workspace).
fn packaged_sdk(work: &Path) -> PathBuf {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let target = work.join("package");
    succeed(
        cargo()
            .current_dir(&repo)
            .args([
                "package",
                "-p",
                "toolhost-sdk",
                "--allow-dirty",
                "--no-verify",
                "--quiet",
            ])
            .arg("--target-dir")
            .arg(&target),
    );
    let version = env!("CARGO_PKG_VERSION");
    let unpacked = work.join("sdk");
    let _ = std::fs::remove_dir_all(&unpacked);
    std::fs::create_dir_all(&unpacked).unwrap();
    succeed(
        Command::new("tar")
            .arg("xzf")
            .arg(target.join(format!("package/toolhost-sdk-{version}.crate")))
            .arg("-C")
            .arg(&unpacked),
    );
    let sdk = unpacked.join(format!("toolhost-sdk-{version}"));
    assert!(
        sdk.join("wit/plugin.wit").is_file(),
        "the package carries its WIT"
    );
    assert!(!sdk.join("tests/wit_in_sync.rs").exists());
    sdk
}

/// docs/guide.md's journey 2 shows the commands this test runs.
#[test]
fn the_guide_shows_the_commands_run_here() {
    let guide =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/guide.md"))
            .expect("docs/guide.md");
    for line in [
        "host new word_count",
        "cd word_count",
        "cargo test",
        "./build",
        "host inspect dist/word_count.wasm",
        r#"host call --plugins dist word_count '{"text":"hello plugin world"}'"#,
    ] {
        assert!(
            guide.lines().any(|l| l == line),
            "docs/guide.md lacks `{line}`"
        );
    }
}

#[test]
fn a_new_plugin_builds_with_one_command_and_the_host_loads_and_calls_it() {
    // Builds are kept between runs here; the project itself is made afresh.
    let work = Path::new(env!("CARGO_TARGET_TMPDIR")).join("host-new");
    std::fs::create_dir_all(&work).unwrap();
    let sdk = packaged_sdk(&work);
    let projects = tempfile::tempdir().unwrap();
    let target_dir = work.join("target");

    let output = succeed(
        host()
            .args(["new", "word_count"])
            .arg("--sdk")
            .arg(&sdk)
            .current_dir(projects.path()),
    );
    let project = projects.path().join("word_count");
    let said = String::from_utf8_lossy(&output.stdout);
    assert!(
        said.starts_with(&format!(
            "created {}: a Rust plugin with one tool, `word_count`",
            Path::new(".").join("word_count").display()
        )),
        "{said}"
    );
    // The project's README says how to ship it, with its own name filled in.
    let readme = std::fs::read_to_string(project.join("README.md")).unwrap();
    assert!(
        readme.contains("host push dist/word_count.wasm oci://REGISTRY/word_count:1"),
        "{readme}"
    );
    let manifest = std::fs::read_to_string(project.join("Cargo.toml")).unwrap();
    assert!(
        manifest.contains(&format!(
            "toolhost-sdk = {{ path = \"{}\" }}",
            std::fs::canonicalize(&sdk).unwrap().display()
        )),
        "{manifest}"
    );

    // The project's own test, natively.
    succeed(
        cargo()
            .args(["test", "--quiet"])
            .env("CARGO_TARGET_DIR", &target_dir)
            .current_dir(&project),
    );
    // One command builds it into dist/.
    succeed(
        Command::new(project.join("build"))
            .env_remove("RUSTFLAGS")
            .env_remove("CARGO_ENCODED_RUSTFLAGS")
            .env_remove("CARGO_BUILD_TARGET")
            .env("CARGO_TARGET_DIR", &target_dir)
            .current_dir(&project),
    );
    let dist = project.join("dist");
    let wasm = std::fs::metadata(dist.join("word_count.wasm"))
        .unwrap()
        .len();
    assert!(dist.join("word_count.toml").is_file());
    // The scaffold's release profile keeps it small (cargo's default profile: ~2x).
    assert!(wasm < 250_000, "word_count.wasm is {wasm} bytes");

    // host inspect: the tool, the manifest's limits, no file access.
    let output = succeed(
        host()
            .args(["inspect", "dist/word_count.wasm", "--cache-dir"])
            .arg(work.join("inspect-cache"))
            .current_dir(&project),
    );
    let report = String::from_utf8_lossy(&output.stdout);
    for line in [
        "  file access: none\n",
        "  limits: 5s per call, 32 MiB memory, no fuel limit, 1 MiB output\n",
        "    word_count  Count the words and characters of a text. Returns {\"words\", \"characters\"}.\n",
    ] {
        assert!(report.contains(line), "{line:?} not in:\n{report}");
    }

    let cache = tempfile::tempdir().unwrap();
    let plugin_flags = |command: &mut Command| {
        command
            .arg("--no-builtins")
            .arg("--plugins")
            .arg(&dist)
            .arg("--cache-dir")
            .arg(cache.path());
    };
    let mut tools = host();
    tools.arg("tools");
    plugin_flags(&mut tools);
    let output = succeed(&mut tools);
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "word_count  Count the words and characters of a text.\n"
    );

    // As the guide and the project's README write it, from the project folder.
    let output = succeed(
        host()
            .args([
                "call",
                "--plugins",
                "dist",
                "word_count",
                r#"{"text":"hello plugin world"}"#,
            ])
            .env("XDG_CACHE_HOME", work.join("xdg-cache"))
            .current_dir(&project),
    );
    let result: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(result, json!({"words": 3, "characters": 18}));

    // An argument of the wrong type: answered for the tool, naming the argument.
    let mut wrong = host();
    wrong.arg("call");
    plugin_flags(&mut wrong);
    wrong.args(["word_count", r#"{"text":3}"#]);
    let output = wrong.stdin(Stdio::null()).output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.starts_with(
            "error [invalid_arguments]: word_count: argument \"text\" must be a string"
        ),
        "{stderr}"
    );

    // Served over MCP by `host run`.
    let mut run = host();
    run.arg("run");
    plugin_flags(&mut run);
    let mut child = run
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for message in [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "cli_new", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "word_count", "arguments": {"text": "one two"}}}),
    ] {
        writeln!(stdin, "{message}").unwrap();
    }
    drop(stdin);
    let output = child.wait_with_output().unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let answer = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .find(|response| response["id"] == 2)
        .expect("an answer to the call");
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    let text = answer["result"]["content"][0]["text"].as_str().unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(text).unwrap(),
        json!({"words": 2, "characters": 7})
    );
}
