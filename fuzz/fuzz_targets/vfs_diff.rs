//! `vfs_diff` (differential): one sequence of file operations, each a built-in tool call,
//! applied to the memory store and to the disk store (osfs) in a fresh temp dir. Both must
//! give the same results and the same errors, and hold the same files at the end.
//!
//! The known differences between the backends are encoded in
//! [`toolhost_fuzz::ops`]'s normalisation below and listed in docs/testing.md; nothing
//! else is skipped.
#![no_main]

use std::sync::Arc;

use arbitrary::{Arbitrary, Unstructured};
use libfuzzer_sys::fuzz_target;
use toolhost::tools::VfsToolOptions;
use toolhost::vfs::{MemoryStorage, OsStorage, Storage};
use toolhost_fuzz::ops::Op;
use toolhost_fuzz::{dispatch, file_registry, normalise};

fuzz_target!(|data: &[u8]| {
    let ops: Vec<Op> = match toolhost_fuzz::text_mode(data) {
        // A seed: `tool {json}` lines.
        Some(text) => toolhost_fuzz::call_lines(text)
            .filter_map(|(tool, arguments)| {
                let tool = toolhost::tools::DEFAULT_TOOL_NAMES
                    .into_iter()
                    .find(|t| *t == tool)?;
                Some(Op {
                    tool,
                    arguments: serde_json::from_str(arguments).ok()?,
                })
            })
            .collect(),
        None => match Vec::<Op>::arbitrary_take_rest(Unstructured::new(data)) {
            Ok(ops) => ops,
            Err(_) => return,
        },
    };
    if ops.len() > 24 {
        return;
    }
    let dir = tempfile::tempdir().expect("a temp dir");
    // Known difference 2 (docs/testing.md): on a case-insensitive file system (macOS's and
    // Windows' defaults) `a` and `A` are one file on disk and two in memory. The harness
    // compares on a case-sensitive temp dir only and says so instead of reporting
    // thousands of false divergences.
    assert!(
        case_sensitive(dir.path()),
        "vfs_diff needs a case-sensitive temp dir (set TMPDIR); {} is case-insensitive",
        dir.path().display()
    );
    let memory: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
    let disk: Arc<dyn Storage> = Arc::new(OsStorage::open(dir.path()).expect("open the temp dir"));
    let registries = [
        file_registry(VfsToolOptions::new(Arc::clone(&memory))),
        file_registry(VfsToolOptions::new(Arc::clone(&disk))),
    ];
    // Known difference 1 (docs/testing.md): once a file was written with an explicit
    // content type, read_file's content_type is the stored one on memory and the one
    // derived from the extension on disk.
    let mut typed = false;
    for (step, op) in ops.iter().enumerate() {
        let arguments = op.arguments.to_string();
        typed |= op.arguments.get("content_type").is_some();
        let [on_memory, on_disk] = registries.each_ref().map(|registry| {
            let mut outcome = normalise(dispatch(registry, op.tool, &arguments));
            // The same holds for the type read_file names when it refuses a binary file.
            match (typed, &mut outcome) {
                (true, Ok(serde_json::Value::Object(map))) => {
                    map.remove("content_type");
                }
                (true, Err((_, message))) => *message = without_binary_type(message),
                _ => {}
            }
            outcome
        });
        assert_eq!(
            on_memory, on_disk,
            "step {step}: {} {arguments}: memory (left) and disk (right) differ",
            op.tool
        );
    }
    let files = |storage: &Arc<dyn Storage>| -> Vec<(String, Vec<u8>)> {
        let list = storage.list().expect("list");
        list.into_iter()
            .map(|entry| {
                let content = storage
                    .read(&entry.path)
                    .expect("read a listed file")
                    .content;
                (entry.path, content)
            })
            .collect()
    };
    assert_eq!(
        files(&memory),
        files(&disk),
        "the stores hold different files at the end"
    );
});

/// Whether `dir`'s file system tells `a` from `A` (checked once per process).
fn case_sensitive(dir: &std::path::Path) -> bool {
    static SENSITIVE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *SENSITIVE.get_or_init(|| {
        std::fs::write(dir.join("a"), b"").expect("write a probe file");
        let sensitive = !dir.join("A").exists();
        std::fs::remove_file(dir.join("a")).expect("remove the probe file");
        sensitive
    })
}

/// `message` with the content type of read_file's "is a binary file (TYPE, N bytes: ..."
/// replaced by `*` (known difference 1).
fn without_binary_type(message: &str) -> String {
    const MARK: &str = "is a binary file (";
    match message.find(MARK) {
        Some(start) => {
            let from = start + MARK.len();
            match message[from..].find(", ") {
                Some(len) => format!("{}*{}", &message[..from], &message[from + len..]),
                None => message.to_owned(),
            }
        }
        None => message.to_owned(),
    }
}
