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
