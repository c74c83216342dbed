//! `host lock` and `--require-lock`, with the greet example plugin.

use super::support::{host, outputs, EXIT_SETUP};
use crate::text;

/// A plugin directory holding greet (and its manifest, if it ships one).
fn greet_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    toolhost_tests::install(dir.path(), &["greet"]).unwrap();
    dir
}

fn tools(dir: &std::path::Path, extra: &[&str]) -> (Option<i32>, String, String) {
    let mut args = vec![
        "tools",
        "--no-builtins",
        "--no-cache",
        "--plugins",
        text(dir),
    ];
    args.extend(extra);
    let out = host(&args, &[]);
    let (stdout, stderr) = outputs(&out);
    (out.status.code(), stdout, stderr)
}

#[test]
fn lock_pins_and_a_flipped_byte_leaves_the_plugin_out_naming_sha256() {
    let dir = greet_dir();
    let out = host(&["lock", "--plugins", text(dir.path())], &[]);
    let (stdout, stderr) = outputs(&out);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let lock_path = dir.path().join("plugins.lock");
    assert!(stdout.starts_with("+ greet.wasm  sha256:"), "{stdout}");
    assert!(
        stdout.ends_with(&format!("1 plugin(s) pinned in {}\n", lock_path.display())),
        "{stdout}"
    );
    let lock = std::fs::read_to_string(&lock_path).unwrap();
    assert!(lock.contains("file = \"greet.wasm\""), "{lock}");

    let (code, stdout, stderr) = tools(dir.path(), &["--require-lock"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.starts_with("greet"), "{stdout}");

    // One byte flipped: greet is left out, the error names the file and both digests.
    let wasm = dir.path().join("greet.wasm");
    let mut bytes = std::fs::read(&wasm).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x20;
    std::fs::write(&wasm, &bytes).unwrap();
    let (code, stdout, stderr) = tools(dir.path(), &[]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(!stdout.contains("greet"), "{stdout}");
    let line = stderr
        .lines()
        .find(|line| line.contains("FAILED to load"))
        .unwrap_or_else(|| panic!("no failure line: {stderr}"));
    assert!(
        line.contains(&format!(
            "{}: refused by {}: its digest is sha256:",
            wasm.display(),
            lock_path.display()
        )),
        "{line}"
    );
    assert_eq!(line.matches("sha256:").count(), 2, "{line}");

    // Re-pinning trusts the new bytes, and says what changed.
    let out = host(&["lock", "--plugins", text(dir.path())], &[]);
    let (stdout, _) = outputs(&out);
    assert!(stdout.starts_with("~ greet.wasm  sha256:"), "{stdout}");
    assert!(stdout.contains(" -> sha256:"), "{stdout}");
}

#[test]
fn require_lock_without_a_lock_is_a_setup_error() {
    let dir = greet_dir();
    let (code, stdout, stderr) = tools(dir.path(), &["--require-lock"]);
    assert_eq!(code, Some(EXIT_SETUP), "{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
    assert!(
        stderr.contains(&format!(
            "error: --require-lock: {} does not exist; pin the plugins of {} with `host lock --plugins {}`",
            dir.path().join("plugins.lock").display(),
            dir.path().display(),
            dir.path().display()
        )),
        "{stderr}"
    );
    // Without --require-lock and without a lock, everything loads as before.
    let (code, stdout, _) = tools(dir.path(), &[]);
    assert_eq!(code, Some(0));
    assert!(stdout.starts_with("greet"), "{stdout}");
}

#[test]
fn an_unlisted_component_is_refused_and_a_broken_lock_stops_the_setup() {
    let dir = tempfile::tempdir().unwrap();
    toolhost_tests::install(dir.path(), &["greet"]).unwrap();
    let out = host(&["lock", "--plugins", text(dir.path())], &[]);
    assert_eq!(out.status.code(), Some(0));
    // divide arrives after the lock was written.
    toolhost_tests::install(dir.path(), &["divide"]).unwrap();
    let (code, stdout, stderr) = tools(dir.path(), &[]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.starts_with("greet"), "{stdout}");
    assert!(!stdout.contains("divide"), "{stdout}");
    assert!(
        stderr.contains("divide.wasm: refused by")
            && stderr.contains("it is not listed in the lock file (its digest is sha256:"),
        "{stderr}"
    );
    // A lock that is not valid is never "no pins".
    std::fs::write(
        dir.path().join("plugins.lock"),
        "version = 1\n[[plugin]]\nfile = 3\n",
    )
    .unwrap();
    let (code, stdout, stderr) = tools(dir.path(), &[]);
    assert_eq!(code, Some(EXIT_SETUP), "{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
    assert!(
        stderr.contains(&format!(
            "{}: invalid lock file: line 3",
            dir.path().join("plugins.lock").display()
        )),
        "{stderr}"
    );
}

#[test]
fn lock_of_a_missing_directory_is_a_setup_error() {
    let out = host(&["lock", "--plugins", "/does/not/exist"], &[]);
    let (_, stderr) = outputs(&out);
    assert_eq!(out.status.code(), Some(EXIT_SETUP));
    assert_eq!(
        stderr,
        "error: --plugins /does/not/exist is not a directory; pass the directory that holds the plugins' .wasm files\n"
    );
}
