//! End to end: the `host` binary refuses a compile cache the tools could write into
//! (exit 3, naming both directories), whether chosen with `--cache-dir` or by default.

use std::path::Path;
use std::process::{Output, Stdio};

use crate::text;

/// The exit code of a set-up error.
const EXIT_SETUP: i32 = 3;

fn host(args: &[&str], env: &[(&str, &Path)]) -> Output {
    let mut command = crate::host();
    command.args(args).stdin(Stdio::null());
    for (name, value) in env {
        command.env(name, value);
    }
    command.output().expect("run host")
}

#[test]
fn run_with_the_cache_inside_the_root_exits_3_naming_both() {
    let root = tempfile::tempdir().unwrap();
    let real_root = root.path().canonicalize().unwrap();
    let cache = root.path().join("cache");
    let out = host(
        &[
            "run",
            "--root",
            text(root.path()),
            "--cache-dir",
            text(&cache),
        ],
        &[],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(EXIT_SETUP), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "the compile cache directory {} is inside the storage root {}",
            real_root.join("cache").display(),
            real_root.display()
        )),
        "{stderr}"
    );
    assert!(!cache.exists(), "nothing was created in the root");
}

#[test]
fn the_default_cache_inside_the_root_is_refused_unless_turned_off() {
    let root = tempfile::tempdir().unwrap();
    let real_root = root.path().canonicalize().unwrap();
    let plugins = tempfile::tempdir().unwrap();
    // The default cache is $XDG_CACHE_HOME/wasm-toolhost: here, inside --root.
    let xdg = root.path().join("xdg");
    let args = [
        "tools",
        "--root",
        text(root.path()),
        "--plugins",
        text(plugins.path()),
    ];
    let out = host(&args, &[("XDG_CACHE_HOME", &xdg)]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(EXIT_SETUP), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "the compile cache directory {} is inside the storage root {}",
            real_root.join("xdg").join("wasm-toolhost").display(),
            real_root.display()
        )),
        "{stderr}"
    );
    assert!(stderr.contains("--no-cache"), "{stderr}");

    let mut off = args.to_vec();
    off.push("--no-cache");
    let out = host(&off, &[("XDG_CACHE_HOME", &xdg)]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!xdg.exists());

    let elsewhere = tempfile::tempdir().unwrap();
    let mut moved = args.to_vec();
    moved.extend(["--cache-dir", text(elsewhere.path())]);
    let out = host(&moved, &[("XDG_CACHE_HOME", &xdg)]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `host run` serves a plugin the cache does not hold on quick code at once, and at the
/// end of its input finishes the optimized compile so the next start is a cache hit;
/// a one-shot command compiles optimized code before it answers.
#[test]
fn run_serves_quick_code_first_and_leaves_the_optimized_code_in_the_cache() {
    use crate::mcp::Server;
    use serde_json::json;

    let root = tempfile::tempdir().unwrap();
    let plugins = tempfile::tempdir().unwrap();
    toolhost_tests::install(plugins.path(), &["greet", "hostile_loop"]).unwrap();
    let cache = tempfile::tempdir().unwrap();
    let session = |expected: &str| {
        let mut server = Server::start(
            root.path(),
            &[
                "--plugins",
                text(plugins.path()),
                "--cache-dir",
                text(cache.path()),
                "--plugin-timeout",
                "300ms",
            ],
        );
        server.request(
            1,
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}),
        );
        assert_eq!(
            server.call(2, "greet", json!({"name": "Ada"})),
            ("Hello, Ada!".to_owned(), false)
        );
        // The time limit holds on whichever code runs.
        let (text, is_error) = server.call(3, "hostile_loop", json!({}));
        assert!(
            is_error && text.starts_with("hostile_loop: timed out after 300ms"),
            "{text}"
        );
        let (code, stderr, _) = server.finish();
        assert_eq!(code, Some(0), "{stderr}");
        for plugin in ["greet", "hostile_loop"] {
            let line = stderr
                .lines()
                .find(|line| line.contains(&format!("plugin {plugin} loaded")))
                .unwrap_or_else(|| panic!("no load line for {plugin}: {stderr}"));
            assert!(line.contains(expected), "{expected}: {line}");
        }
        stderr
    };
    let first = session("quick code compiled in");
    assert!(!first.contains("cache hit"), "{first}");
    // The key file and one entry per plugin, written before the exit.
    let entries = std::fs::read_dir(cache.path()).unwrap().count();
    assert_eq!(entries, 3, "{first}");
    let second = session("cache hit, loaded in");
    assert!(!second.contains("quick code"), "{second}");

    let empty = tempfile::tempdir().unwrap();
    let out = host(
        &[
            "tools",
            "-v",
            "--no-builtins",
            "--plugins",
            text(plugins.path()),
            "--cache-dir",
            text(empty.path()),
        ],
        &[],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("plugin greet loaded: 1 tool(s) [greet], compiled in"),
        "{stderr}"
    );
    assert!(!stderr.contains("quick code"), "{stderr}");
}
