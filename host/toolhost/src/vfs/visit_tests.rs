//! [`Storage::visit_paths`] and [`Storage::visit_files`] on every backend: the order of
//! `list` (byte order of the full paths, whatever the directories), and a stop when the
//! visitor says so.

use std::ops::ControlFlow;
use std::sync::Arc;

use super::{scope, MemoryStorage, OsStorage, Storage};

/// Names whose byte order differs from a per-directory order that ignores the `/`.
const TREE: [&str; 11] = [
    "a-b", "a.md", "a/x", "a/y/z", "a0", "a.b/x", "b/c/d", "B.md", "a/x.d/e", "a/x-d", "ab/a",
];

/// Every backend with `TREE` in it (the scoped ones with siblings around the scope).
fn backends() -> Vec<(&'static str, Arc<dyn Storage>, Option<tempfile::TempDir>)> {
    let mut out: Vec<(&'static str, Arc<dyn Storage>, Option<tempfile::TempDir>)> = Vec::new();
    for kind in ["memory", "os", "scoped memory", "scoped os"] {
        let dir = kind.ends_with("os").then(|| tempfile::tempdir().unwrap());
        let base: Arc<dyn Storage> = match &dir {
            Some(dir) => Arc::new(OsStorage::open(dir.path()).unwrap()),
            None => Arc::new(MemoryStorage::new()),
        };
        let storage: Arc<dyn Storage> = if kind.starts_with("scoped") {
            for sibling in ["t/a.md", "t/ab/x", "t/a-/x", "u.md", "s/x"] {
                base.write(sibling, b"-", "").unwrap();
            }
            Arc::new(scope(base, "t/a").unwrap())
        } else {
            base
        };
        for path in TREE {
            storage.write(path, path.as_bytes(), "").unwrap();
        }
        out.push((kind, storage, dir));
    }
    out
}

fn sorted_tree() -> Vec<String> {
    let mut want: Vec<String> = TREE.map(String::from).to_vec();
    want.sort();
    want
}

#[test]
fn visits_come_in_path_order() {
    for (kind, storage, _dir) in backends() {
        let mut paths = Vec::new();
        storage
            .visit_paths(&mut |path| {
                paths.push(path);
                ControlFlow::Continue(())
            })
            .unwrap();
        assert_eq!(paths, sorted_tree(), "{kind}");
        assert_eq!(storage.list_paths().unwrap(), sorted_tree(), "{kind}");
        let mut files = Vec::new();
        storage
            .visit_files(&mut |entry| {
                files.push(entry);
                ControlFlow::Continue(())
            })
            .unwrap();
        assert_eq!(files, storage.list().unwrap(), "{kind}");
        let sizes: Vec<u64> = files.iter().map(|f| f.size).collect();
        let want: Vec<u64> = sorted_tree().iter().map(|p| p.len() as u64).collect();
        assert_eq!(sizes, want, "{kind}");
    }
}

#[test]
fn a_visit_stops_when_told() {
    for (kind, storage, _dir) in backends() {
        let mut seen = Vec::new();
        storage
            .visit_paths(&mut |path| {
                seen.push(path);
                if seen.len() == 4 {
                    ControlFlow::Break(())
                } else {
                    ControlFlow::Continue(())
                }
            })
            .unwrap();
        assert_eq!(seen, sorted_tree()[..4], "{kind}");
        let mut calls = 0;
        storage
            .visit_files(&mut |_| {
                calls += 1;
                ControlFlow::Break(())
            })
            .unwrap();
        assert_eq!(calls, 1, "{kind}");
    }
}

/// The memory store copies its map 1024 paths at a time: the chunks join without a gap
/// or a repeat, also when files are written between them.
#[test]
fn memory_visits_join_their_chunks() {
    let storage = MemoryStorage::new();
    for i in 0..2500 {
        storage.write(&format!("f{i:04}"), b"", "").unwrap();
    }
    let mut seen = Vec::new();
    storage
        .visit_paths(&mut |path| {
            if seen.len() == 1500 {
                // Behind the walk: not seen; ahead of it: seen.
                storage.write("a-late", b"", "").unwrap();
                storage.write("f9999", b"", "").unwrap();
            }
            seen.push(path);
            ControlFlow::Continue(())
        })
        .unwrap();
    let mut want: Vec<String> = (0..2500).map(|i| format!("f{i:04}")).collect();
    want.push("f9999".into());
    assert_eq!(seen, want);
}
