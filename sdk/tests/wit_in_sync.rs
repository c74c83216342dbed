//! `sdk/wit/` is a copy of the repository's `wit/` (the SDK may only read files inside its
//! own folder, so that `cargo package -p toolhost-sdk` works): it must not drift.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests: a failed unwrap is a failed test, with its location"
)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Every file under `dir`, by its path relative to `dir`, with its bytes.
fn files(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    fn walk(base: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
        let entries = std::fs::read_dir(dir)
            .unwrap_or_else(|err| panic!("cannot read {}: {err}", dir.display()));
        for entry in entries {
            let path = entry.expect("directory entry").path();
            if path.is_dir() {
                walk(base, &path, out);
            } else {
                let bytes = std::fs::read(&path)
                    .unwrap_or_else(|err| panic!("cannot read {}: {err}", path.display()));
                out.insert(path.strip_prefix(base).unwrap().to_owned(), bytes);
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

#[test]
fn sdk_wit_is_a_copy_of_the_repository_wit() {
    let sdk = Path::new(env!("CARGO_MANIFEST_DIR"));
    let source = files(&sdk.join("../wit"));
    let copy = files(&sdk.join("wit"));
    assert!(!source.is_empty(), "wit/ holds the plugin interface");
    let names = |map: &BTreeMap<PathBuf, Vec<u8>>| map.keys().cloned().collect::<Vec<_>>();
    assert_eq!(
        names(&copy),
        names(&source),
        "sdk/wit/ and wit/ hold different files: run scripts/sync-wit"
    );
    for (path, bytes) in &source {
        assert!(
            copy[path] == *bytes,
            "sdk/wit/{} differs from wit/{}: run scripts/sync-wit",
            path.display(),
            path.display()
        );
    }
}
