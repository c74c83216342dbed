//! The walk in windows: a directory wider than its share of the budget is read in
//! several passes that join without a gap, a repeat or a change of order.

use std::ops::ControlFlow;
use std::path::Path;

use cap_std::ambient_authority;
use cap_std::fs::Dir;

use super::{read_window, walk_files, WALK_BUDGET};

/// Names whose byte order differs from a per-directory order that ignores the `/`.
const TRICKY: [&str; 9] = [
    "a-b", "a.md", "a/x", "a/y/z", "a0", "a.b/x", "a/x.d/e", "a/x-d", "ab/a",
];

fn put(root: &Path, path: &str) {
    let path = root.join(path);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, b"x").unwrap();
}

/// A tree of `TRICKY` and 300 files in `wide/` and 40 in `wide/deep/`.
fn tree() -> (tempfile::TempDir, Vec<String>) {
    let root = tempfile::tempdir().unwrap();
    let mut paths: Vec<String> = TRICKY.map(String::from).to_vec();
    paths.extend((0..300).map(|i| format!("wide/f{i:03}")));
    paths.extend((0..40).map(|i| format!("wide/deep/g{i:02}.md")));
    paths.push("wide/f150-".into());
    paths.push("wide/f150.d/x".into());
    for path in &paths {
        put(root.path(), path);
    }
    paths.sort();
    (root, paths)
}

fn open(root: &Path) -> Dir {
    Dir::open_ambient_dir(root, ambient_authority()).unwrap()
}

fn walked(dir: &Dir, budget: usize) -> Vec<String> {
    let mut paths = Vec::new();
    let flow = walk_files(dir, "", budget, &mut |found| {
        paths.push(found.path);
        Ok(ControlFlow::Continue(()))
    })
    .unwrap();
    assert!(flow.is_continue());
    paths
}

#[test]
fn windows_of_any_size_give_the_path_order() {
    let (root, want) = tree();
    let dir = open(root.path());
    // The default budget holds every directory in one window; the others need from a
    // few passes per directory down to one name per pass.
    for budget in [WALK_BUDGET, 4096, 600, 64, 1] {
        assert_eq!(walked(&dir, budget), want, "budget {budget}");
    }
}

#[test]
fn a_window_holds_its_budget_and_says_when_more_is_left() {
    let (root, _) = tree();
    let dir = open(root.path()).open_dir("wide").unwrap();
    // 8 bytes of span per key: `deep/` (13 bytes) and 23 of f000.. (12 bytes each) make
    // 289 bytes, a 24th would pass 300.
    let first = read_window(&dir, "wide/", None, 300).unwrap();
    assert_eq!(first.bytes(), 289);
    assert!(first.more);
    let keys: Vec<&str> = first.keys().collect();
    let mut want = vec!["deep/".to_owned()];
    want.extend((0..23).map(|i| format!("f{i:03}")));
    assert_eq!(keys, want);
    // The next window starts past the last key.
    let next = read_window(&dir, "wide/", keys.last().copied(), 300).unwrap();
    assert_eq!(next.keys().next(), Some("f023"));
    // The whole directory in one window: not more.
    let all = read_window(&dir, "wide/", None, WALK_BUDGET / 2).unwrap();
    assert!(!all.more);
    assert_eq!(all.keys().count(), 300 + 3);
    assert_eq!(all.keys().next(), Some("deep/"));
}

/// A file made behind the walk's cursor during the walk is not seen, one ahead of it is,
/// and nothing comes twice: the next window starts past the last name visited.
#[test]
fn files_made_during_a_walk_in_windows_come_once_in_order() {
    let root = tempfile::tempdir().unwrap();
    for i in 0..100 {
        put(root.path(), &format!("f{i:03}"));
    }
    let dir = open(root.path());
    let mut seen = Vec::new();
    let flow = walk_files(&dir, "", 200, &mut |found| {
        if found.path == "f050" {
            put(root.path(), "f000a");
            put(root.path(), "f099a");
        }
        seen.push(found.path);
        Ok(ControlFlow::Continue(()))
    })
    .unwrap();
    assert!(flow.is_continue());
    let mut want: Vec<String> = (0..100).map(|i| format!("f{i:03}")).collect();
    want.push("f099a".into());
    assert_eq!(seen, want);
}

/// A stop in the middle of a window of a directory in several windows ends the walk.
#[test]
fn a_walk_in_windows_stops_when_told() {
    let (root, want) = tree();
    let dir = open(root.path());
    let mut seen = Vec::new();
    let flow = walk_files(&dir, "", 64, &mut |found| {
        seen.push(found.path);
        Ok(if seen.len() == 200 {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        })
    })
    .unwrap();
    assert!(flow.is_break());
    assert_eq!(seen, want[..200]);
}
