//! Property tests (proptest, stable Rust) for the invariants users count on, on the
//! memory store and on disk:
//!
//! - a failed `edit_file`, `multi_edit`, `write_file` or `move_file` leaves every file
//!   byte-identical;
//! - `replace_all` replaces exactly the occurrences it counts;
//! - reading a file page by page (following the cut-line notices) and joining the pages
//!   gives the file;
//! - a move never loses a file: its content is under the old or the new name.
//!
//! Inputs come from small alphabets so that operations meet (a path that is a file here
//! and a directory there, names that differ in case, overlapping matches). A failing
//! case is shrunk and printed by proptest; add it to the regression tests as a plain
//! `#[test]` once fixed.

use std::collections::BTreeMap;
use std::sync::Arc;

use proptest::prelude::*;
use serde_json::{json, Value};
use toolhost::registry::{CallContext, Environment, Registry, ToolCall, ToolError};
use toolhost::tools::{register_vfs_tools, VfsToolOptions};
use toolhost::vfs::{MemoryStorage, OsStorage, Storage};

/// A store and the registry of file tools over it (the temp dir lives as long).
struct Store {
    storage: Arc<dyn Storage>,
    registry: Registry,
    _dir: Option<tempfile::TempDir>,
}

impl Store {
    fn new(on_disk: bool, max_file_bytes: u64) -> Self {
        let (storage, dir): (Arc<dyn Storage>, _) = if on_disk {
            let dir = tempfile::tempdir().expect("temp dir");
            (
                Arc::new(OsStorage::open(dir.path()).expect("open")),
                Some(dir),
            )
        } else {
            (Arc::new(MemoryStorage::new()), None)
        };
        let registry = Registry::new();
        let options = VfsToolOptions::builder(Arc::clone(&storage))
            .max_file_bytes(max_file_bytes)
            .build();
        register_vfs_tools(&registry, options).expect("file tools");
        Self {
            storage,
            registry,
            _dir: dir,
        }
    }

    fn call(&self, tool: &str, arguments: &Value) -> Result<Value, ToolError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("runtime");
        runtime
            .block_on(self.registry.dispatch(
                &CallContext::new(),
                &ToolCall::new(tool, arguments.to_string()),
                &Environment::default(),
            ))
            .map(|result| result.content)
    }

    /// Every file and its bytes.
    fn snapshot(&self) -> BTreeMap<String, Vec<u8>> {
        self.storage
            .list()
            .expect("list")
            .into_iter()
            .map(|entry| {
                let content = self.storage.read(&entry.path).expect("read").content;
                (entry.path, content)
            })
            .collect()
    }
}

/// Paths that collide: a file and a directory of the same name, case variants, hidden
/// names, and an invalid path now and then.
fn path() -> impl Strategy<Value = String> {
    prop_oneof![
        8 => prop::collection::vec(
            prop::sample::select(vec!["a", "b", "A", "dir", "x.md", "X.md", ".h", "é"]),
            1..=3
        )
        .prop_map(|parts| parts.join("/")),
        1 => prop::sample::select(vec!["../a", "/a", "a/", "a//b", ""]).prop_map(str::to_owned),
    ]
}

/// Text from pieces that overlap and repeat.
fn text() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop::sample::select(vec!["a", "aa", "b", "ab", "\n", "\r\n", "é", " ", "x"]),
        0..12,
    )
    .prop_map(|pieces| pieces.concat())
}

fn files() -> impl Strategy<Value = Vec<(String, String)>> {
    prop::collection::vec((path(), text()), 0..5)
}

/// An operation of the four that change files, built to fail often: strings that are
/// absent or ambiguous, equal old and new strings, invalid paths, existing destinations.
fn changing_op() -> impl Strategy<Value = (&'static str, Value)> {
    let edit = (path(), text(), text(), any::<bool>()).prop_map(|(p, old, new, all)| {
        (
            "edit_file",
            json!({"path": p, "old_string": old, "new_string": new, "replace_all": all}),
        )
    });
    let multi = (
        path(),
        prop::collection::vec((text(), text(), any::<bool>()), 0..4),
    )
        .prop_map(|(p, edits)| {
            let edits: Vec<Value> = edits
                .into_iter()
                .map(|(old, new, all)| json!({"old_string": old, "new_string": new, "replace_all": all}))
                .collect();
            ("multi_edit", json!({"path": p, "edits": edits}))
        });
    let write = (path(), text())
        .prop_map(|(p, content)| ("write_file", json!({"path": p, "content": content})));
    let moved = (path(), path(), any::<bool>()).prop_map(|(from, to, overwrite)| {
        (
            "move_file",
            json!({"source": from, "destination": to, "overwrite": overwrite}),
        )
    });
    prop_oneof![edit, multi, write, moved]
}

fn seed(store: &Store, files: &[(String, String)]) {
    for (path, content) in files {
        // Invalid or colliding paths are refused; the rest is the starting state.
        let _ = store.storage.write(path, content.as_bytes(), "");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn a_failed_change_leaves_every_file_byte_identical(
        on_disk in any::<bool>(),
        small_cap in any::<bool>(),
        files in files(),
        (tool, arguments) in changing_op(),
    ) {
        let store = Store::new(on_disk, if small_cap { 8 } else { 1 << 20 });
        seed(&store, &files);
        let before = store.snapshot();
        if let Err(err) = store.call(tool, &arguments) {
            prop_assert_eq!(store.snapshot(), before, "{} {} failed ({}) and changed files", tool, arguments, err);
        }
    }

    #[test]
    fn replace_all_replaces_exactly_the_counted_occurrences(
        on_disk in any::<bool>(),
        content in text(),
        old in text().prop_filter("an old string", |s| !s.is_empty()),
        new in text(),
    ) {
        prop_assume!(old != new);
        let store = Store::new(on_disk, 1 << 20);
        store.storage.write("f.md", content.as_bytes(), "").expect("write");
        let count = content.matches(old.as_str()).count();
        let result = store.call("edit_file", &json!({"path": "f.md", "old_string": old, "new_string": new, "replace_all": true}));
        let after = store.storage.read("f.md").expect("read").content;
        if count == 0 {
            prop_assert!(matches!(result, Err(ToolError::Failed { .. } | ToolError::InvalidArguments { .. })), "{:?}", result);
            prop_assert_eq!(after, content.as_bytes());
        } else {
            let expected = content.replace(old.as_str(), new.as_str());
            let result = result.expect("an edit of a present string");
            prop_assert_eq!(&result["replacements"], &json!(count));
            prop_assert_eq!(&result["size"], &json!(expected.len()));
            prop_assert_eq!(after, expected.as_bytes());
        }
    }

    #[test]
    fn a_move_never_loses_a_file(
        on_disk in any::<bool>(),
        files in files(),
        source in path(),
        destination in prop_oneof![path(), path().prop_map(|p| p.to_uppercase())],
        overwrite in any::<bool>(),
    ) {
        let store = Store::new(on_disk, 1 << 20);
        seed(&store, &files);
        let before = store.snapshot();
        let result = store.call("move_file", &json!({"source": source, "destination": destination, "overwrite": overwrite}));
        let after = store.snapshot();
        match (&result, before.get(&source)) {
            (Ok(_), moved) => {
                let moved = moved.expect("a move succeeded, so the source existed");
                prop_assert_eq!(after.get(&destination), Some(moved), "{:?}", result);
                if source != destination {
                    prop_assert!(!after.contains_key(&source));
                }
                // Nothing else changed, apart from the file the move replaced.
                for (path, content) in &before {
                    if *path != source && *path != destination {
                        prop_assert_eq!(after.get(path), Some(content), "{} changed", path);
                    }
                }
            }
            (Err(_), _) => prop_assert_eq!(&after, &before),
        }
    }
}

/// Lines of every length around the 40 KiB window, with characters that encode to 2 or
/// more bytes in JSON and multi-byte characters at the cut.
fn page_text() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        6 => prop::sample::select(vec!["a", "bc", "\n", "\r\n", "é", "€", "😀", "\"", "\\", "\t", "\u{1}", " "]).prop_map(str::to_owned),
        1 => (1usize..30_000, prop::sample::select(vec!["x", "é", "\"", "😀"])).prop_map(|(n, c)| c.repeat(n)),
    ];
    prop::collection::vec(piece, 0..40).prop_map(|pieces| pieces.concat())
}

/// `N\t` stripped from a shown line.
fn strip_number(line: &str, number: u64) -> &str {
    line.strip_prefix(&format!("{number}\t"))
        .unwrap_or_else(|| panic!("line {number} lacks its number: {line:?}"))
}

/// Reads `path` page by page with `limit` lines per call, following cut-line notices,
/// and joins what the pages show.
fn read_all(store: &Store, path: &str, limit: u64) -> String {
    let notice = regex_lite_notice();
    let (mut offset, mut column) = (1_u64, None::<u64>);
    let mut joined = String::new();
    for _ in 0..100_000 {
        let mut arguments = json!({"path": path, "offset": offset, "limit": limit});
        if let Some(column) = column {
            arguments["column"] = json!(column);
        }
        let page = store.call("read_file", &arguments).expect("a page");
        let content = page["content"].as_str().expect("content");
        let mut number = offset;
        let mut next = None;
        for line in content.split_inclusive('\n') {
            let shown = strip_number(line, number);
            if let Some((text, (n, c))) = notice(shown) {
                joined.push_str(text);
                next = Some((n, Some(c)));
                break;
            }
            joined.push_str(shown);
            number += 1;
        }
        if page["truncated"] != json!(true) {
            return joined;
        }
        (offset, column) = next.unwrap_or((number, None));
    }
    panic!("reading {path} did not end");
}

/// Parses a trailing `[line N is cut here; read on with offset N and column C]\n`.
fn regex_lite_notice() -> impl Fn(&str) -> Option<(&str, (u64, u64))> {
    |shown: &str| {
        let body = shown.strip_suffix("]\n")?;
        let start = body.rfind("[line ")?;
        let (text, notice) = (&body[..start], &body[start..]);
        let rest = notice.strip_prefix("[line ")?;
        let (line, rest) = rest.split_once(" is cut here; read on with offset ")?;
        let (offset, column) = rest.split_once(" and column ")?;
        let (line, offset, column): (u64, u64, u64) = (
            line.parse().ok()?,
            offset.parse().ok()?,
            column.parse().ok()?,
        );
        (line == offset).then_some((text, (offset, column)))
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn paging_read_file_joins_to_the_file(content in page_text(), limit in 1u64..5) {
        let store = Store::new(false, 1 << 20);
        store.storage.write("f.txt", content.as_bytes(), "").expect("write");
        let joined = read_all(&store, "f.txt", limit);
        // Every shown line ends in a newline, the last one too.
        let expected = if content.is_empty() || content.ends_with('\n') {
            content
        } else {
            format!("{content}\n")
        };
        prop_assert!(joined == expected, "joined pages differ from the file ({} vs {} bytes)", joined.len(), expected.len());
    }
}
