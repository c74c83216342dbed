//! Pins: a directory with a `plugins.lock` loads only the components (and
//! manifests) whose digests it pins; a swapped, unlisted or re-manifested plugin is
//! refused with one error naming the file and both digests, and the rest load.

use std::path::Path;

use super::fixture::{self, EMPTY_SCHEMA};
use super::*;
use crate::lock::{LockError, LockMismatch, PluginLock, Sha256Digest};

/// `one.wasm` (tool `one`, manifest `one.toml`) and `two.wasm` (tool `two`, no
/// manifest), pinned.
fn pinned_dir() -> (tempfile::TempDir, PluginLock) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("one.wasm"),
        fixture::component(&[("one", EMPTY_SCHEMA)]),
    )
    .unwrap();
    std::fs::write(dir.path().join("one.toml"), "[limits]\ntimeout_ms = 5000\n").unwrap();
    std::fs::write(
        dir.path().join("two.wasm"),
        fixture::component(&[("two", EMPTY_SCHEMA)]),
    )
    .unwrap();
    let (lock, _) = PluginLock::scan(dir.path(), None).unwrap();
    lock.write(dir.path()).unwrap();
    (dir, lock)
}

fn load(dir: &Path) -> (Registry, LoadReport) {
    let registry = Registry::new();
    let report = PluginHost::new(config()).unwrap().load_dir(dir, &registry);
    (registry, report)
}

fn loaded_names(report: &LoadReport) -> Vec<&str> {
    report.loaded.iter().map(|p| p.name.as_str()).collect()
}

#[test]
fn a_pinned_directory_loads_everything() {
    let (dir, _) = pinned_dir();
    let (registry, report) = load(dir.path());
    assert!(report.failed.is_empty(), "{:?}", report.failed);
    assert_eq!(loaded_names(&report), ["one", "two"]);
    assert_eq!(report.lock, Some(dir.path().join("plugins.lock")));
    assert_eq!(registry.names(), ["one", "two"]);
}

#[test]
fn one_flipped_byte_refuses_that_plugin_naming_both_digests() {
    let (dir, lock) = pinned_dir();
    let wasm = dir.path().join("one.wasm");
    let mut bytes = std::fs::read(&wasm).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(&wasm, &bytes).unwrap();
    let (registry, report) = load(dir.path());
    assert_eq!(loaded_names(&report), ["two"]);
    assert_eq!(registry.names(), ["two"]);
    let [failure] = &report.failed[..] else {
        panic!("{:?}", report.failed)
    };
    let pinned = lock.entry("one.wasm").unwrap().digest;
    let actual = Sha256Digest::of(&bytes);
    assert_eq!(failure.error.path(), Some(wasm.as_path()));
    match failure.error.kind() {
        PluginErrorKind::Unpinned {
            lock: lock_path,
            mismatch,
        } => {
            assert_eq!(lock_path, &dir.path().join("plugins.lock"));
            assert_eq!(mismatch, &LockMismatch::Component { pinned, actual });
        }
        other => panic!("not Unpinned: {other:?}"),
    }
    let text = failure.error.to_string();
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(
        text.starts_with(&format!(
            "{}: refused by {}: its digest is {actual}, but the lock pins {pinned}",
            wasm.display(),
            dir.path().join("plugins.lock").display()
        )),
        "{text}"
    );
    assert_eq!(failure.error.name(), "unpinned");
}

#[test]
fn a_changed_added_or_removed_manifest_is_refused() {
    // Changed: a manifest that would raise what the plugin gets.
    let (dir, lock) = pinned_dir();
    let manifest = dir.path().join("one.toml");
    std::fs::write(&manifest, "[limits]\ntimeout_ms = 6000\n").unwrap();
    let (_, report) = load(dir.path());
    assert_eq!(loaded_names(&report), ["two"]);
    let error = &report.failed[0].error;
    assert_eq!(error.path(), Some(manifest.as_path()));
    assert!(matches!(
        error.kind(),
        PluginErrorKind::Unpinned {
            mismatch: LockMismatch::Manifest {
                pinned: Some(_),
                actual: Some(_)
            },
            ..
        }
    ));
    // Removed.
    std::fs::remove_file(&manifest).unwrap();
    let (_, report) = load(dir.path());
    assert!(
        report.failed[0]
            .error
            .to_string()
            .contains("the lock pins a manifest"),
        "{}",
        report.failed[0].error
    );
    // Added to a plugin pinned without one.
    std::fs::write(dir.path().join("one.toml"), lock_text_of(&lock, "one.wasm")).unwrap();
    std::fs::write(dir.path().join("two.toml"), "[limits]\n").unwrap();
    let (_, report) = load(dir.path());
    let texts: Vec<String> = report.failed.iter().map(|f| f.error.to_string()).collect();
    assert!(
        texts.iter().any(|t| t.contains("two.toml: refused by")
            && t.contains("it has a manifest (sha256:")
            && t.contains("but the lock pins none")),
        "{texts:?}"
    );
}

/// Some text that is not the pinned manifest of `file`.
fn lock_text_of(lock: &PluginLock, file: &str) -> String {
    format!("# {}\n", lock.entry(file).unwrap().digest)
}

#[test]
fn a_component_missing_from_the_lock_is_refused_and_the_rest_load() {
    let (dir, _) = pinned_dir();
    let extra = dir.path().join("three.wasm");
    let bytes = fixture::component(&[("three", EMPTY_SCHEMA)]);
    std::fs::write(&extra, &bytes).unwrap();
    let (registry, report) = load(dir.path());
    assert_eq!(registry.names(), ["one", "two"]);
    let [failure] = &report.failed[..] else {
        panic!("{:?}", report.failed)
    };
    assert_eq!(failure.path, extra);
    assert!(matches!(
        failure.error.kind(),
        PluginErrorKind::Unpinned { mismatch: LockMismatch::NotListed { actual }, .. }
            if *actual == Sha256Digest::of(&bytes)
    ));
    assert!(
        failure
            .error
            .to_string()
            .contains("it is not listed in the lock file (its digest is sha256:"),
        "{}",
        failure.error
    );
}

#[test]
fn a_broken_lock_loads_nothing() {
    let (dir, _) = pinned_dir();
    std::fs::write(dir.path().join("plugins.lock"), "version = 1\n[[plugin]]\n").unwrap();
    let (registry, report) = load(dir.path());
    assert!(registry.is_empty());
    assert!(report.loaded.is_empty());
    let [failure] = &report.failed[..] else {
        panic!("{:?}", report.failed)
    };
    assert_eq!(failure.path, dir.path().join("plugins.lock"));
    assert!(
        matches!(
            failure.error.kind(),
            PluginErrorKind::Lock(LockError::Invalid { .. })
        ),
        "{:?}",
        failure.error
    );
    assert_eq!(failure.error.name(), "lock");
    assert_eq!(
        failure.error.path(),
        Some(dir.path().join("plugins.lock").as_path())
    );
}

#[test]
fn without_a_lock_everything_loads_and_load_dir_pinned_none_ignores_it() {
    let (dir, _) = pinned_dir();
    std::fs::write(
        dir.path().join("one.wasm"),
        fixture::component(&[("uno", EMPTY_SCHEMA)]),
    )
    .unwrap();
    let registry = Registry::new();
    let report = PluginHost::new(config())
        .unwrap()
        .load_dir_pinned(dir.path(), &registry, None);
    assert_eq!(report.lock, None);
    assert_eq!(registry.names(), ["uno", "two"]);
    std::fs::remove_file(dir.path().join("plugins.lock")).unwrap();
    let (registry, report) = load(dir.path());
    assert_eq!(report.lock, None);
    assert_eq!(registry.names(), ["uno", "two"]);
}

#[test]
fn the_compile_cache_is_keyed_by_the_pinned_digest() {
    let (dir, lock) = pinned_dir();
    let cache = tempfile::tempdir().unwrap();
    let cache_dir = cache.path().join("c");
    let host = PluginHost::new(PluginHostConfig {
        cache_dir: Some(cache_dir.clone()),
        ..config()
    })
    .unwrap();
    let registry = Registry::new();
    let report = host.load_dir(dir.path(), &registry);
    assert_eq!(loaded_names(&report), ["one", "two"]);
    let bytes = std::fs::read(dir.path().join("one.wasm")).unwrap();
    assert_eq!(
        lock.entry("one.wasm").unwrap().digest,
        Sha256Digest::of(&bytes)
    );
    let entry = host.plain.cache.entry(&bytes).unwrap();
    assert!(entry.is_file(), "{}", entry.display());
    // A second host finds it by the same digest.
    let second = PluginHost::new(PluginHostConfig {
        cache_dir: Some(cache_dir),
        ..config()
    })
    .unwrap();
    let report = second.load_dir(dir.path(), &Registry::new());
    assert!(
        report
            .loaded
            .iter()
            .all(|p| matches!(p.compile, CompileSource::CacheHit(_))),
        "{:?}",
        report.loaded
    );
}
