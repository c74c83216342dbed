//! grep's suite, run on both backends.

use std::sync::OnceLock;
use std::time::Duration;

use serde_json::{json, Value};

use super::scan::merge;
use super::*;
use crate::tools::testutil::{backend_tests, invalid_arguments, Backend, Harness};
use crate::vfs::{FileEntry, MemoryStorage};

async fn grep(h: &Harness, arguments: Value) -> Value {
    h.call("grep", arguments).await.unwrap()
}

fn matches(list: &[&str]) -> Value {
    json!({"matches": list, "truncated": false})
}

async fn content_lines_in_path_order(backend: Backend) {
    let h = backend.default_harness();
    // Written out of order, many files: the answer's order comes from the paths, whatever
    // thread scanned which file.
    for i in (0..40).rev() {
        h.put(&format!("d/f{i:02}.md"), format!("skip\nhit {i}\n"));
    }
    h.put("a.md", "no\nhit a\nhit again\n");
    let result = grep(&h, json!({"pattern": "hit"})).await;
    let mut expected = vec!["a.md:2:hit a".to_owned(), "a.md:3:hit again".to_owned()];
    expected.extend((0..40).map(|i| format!("d/f{i:02}.md:2:hit {i}")));
    assert_eq!(result, json!({"matches": expected, "truncated": false}));
}

async fn context_lines(backend: Backend) {
    let h = backend.default_harness();
    h.put("a.md", "one\ntwo\nthree\nfour\nfive\nsix\nseven\n");
    let result = grep(&h, json!({"pattern": "three|five", "context": 1})).await;
    assert_eq!(
        result,
        matches(&[
            "a.md-2-two",
            "a.md:3:three",
            "a.md-4-four",
            "a.md:5:five",
            "a.md-6-six"
        ])
    );
    let result = grep(&h, json!({"pattern": "^one", "context": 5})).await;
    assert_eq!(
        result,
        matches(&[
            "a.md:1:one",
            "a.md-2-two",
            "a.md-3-three",
            "a.md-4-four",
            "a.md-5-five",
            "a.md-6-six"
        ])
    );
}

async fn output_modes(backend: Backend) {
    let h = backend.default_harness();
    h.put("a.md", "x\ny\nx x\n");
    h.put("b.md", "y\n");
    h.put("c/d.md", "x\n");
    assert_eq!(
        grep(
            &h,
            json!({"pattern": "x", "output_mode": "files_with_matches"})
        )
        .await,
        json!({"files": ["a.md", "c/d.md"], "truncated": false})
    );
    assert_eq!(
        grep(&h, json!({"pattern": "x", "output_mode": "count"})).await,
        json!({"counts": [{"path": "a.md", "count": 2}, {"path": "c/d.md", "count": 1}], "truncated": false})
    );
    assert_eq!(
        grep(&h, json!({"pattern": "x", "output_mode": "content"})).await,
        matches(&["a.md:1:x", "a.md:3:x x", "c/d.md:1:x"])
    );
    assert_eq!(grep(&h, json!({"pattern": "zzz"})).await, matches(&[]));
    let message = invalid_arguments(
        h.call("grep", json!({"pattern": "x", "output_mode": "lines"}))
            .await,
    );
    assert_eq!(
        message,
        "argument \"output_mode\" must be one of content, files_with_matches, count; got \"lines\""
    );
}

async fn case_insensitive(backend: Backend) {
    let h = backend.default_harness();
    h.put("a.md", "Hello\nHELLO\nhello\nhelo\n");
    assert_eq!(
        grep(&h, json!({"pattern": "hello"})).await,
        matches(&["a.md:3:hello"])
    );
    assert_eq!(
        grep(&h, json!({"pattern": "hello", "case_insensitive": true})).await,
        matches(&["a.md:1:Hello", "a.md:2:HELLO", "a.md:3:hello"])
    );
}

async fn path_glob_filters_files(backend: Backend) {
    let h = backend.default_harness();
    h.put("a.md", "x\n");
    h.put("a.txt", "x\n");
    h.put("docs/b.md", "x\n");
    assert_eq!(
        grep(&h, json!({"pattern": "x", "path_glob": "*.md"})).await,
        matches(&["a.md:1:x"])
    );
    assert_eq!(
        grep(&h, json!({"pattern": "x", "path_glob": "**/*.md"})).await,
        matches(&["a.md:1:x", "docs/b.md:1:x"])
    );
    assert_eq!(
        grep(&h, json!({"pattern": "x", "path_glob": "*.{txt,pdf}"})).await,
        matches(&["a.txt:1:x"])
    );
    let message = invalid_arguments(
        h.call("grep", json!({"pattern": "x", "path_glob": "[a"}))
            .await,
    );
    assert!(
        message.starts_with("argument \"path_glob\" is not a valid glob: "),
        "{message}"
    );
}

async fn dollar_anchors_each_line(backend: Backend) {
    let h = backend.default_harness();
    h.put("lf.md", "end\nend here\nthe end\n");
    h.put("crlf.md", "end\r\nend here\r\nthe end\r\n");
    assert_eq!(
        grep(&h, json!({"pattern": "end$"})).await,
        matches(&[
            "crlf.md:1:end",
            "crlf.md:3:the end",
            "lf.md:1:end",
            "lf.md:3:the end"
        ])
    );
    assert_eq!(
        grep(&h, json!({"pattern": "^end$", "output_mode": "count"})).await,
        json!({"counts": [{"path": "crlf.md", "count": 1}, {"path": "lf.md", "count": 1}], "truncated": false})
    );
}

async fn binary_files_are_skipped(backend: Backend) {
    let h = backend.default_harness();
    h.put("a.bin", b"match\0\x01\x02");
    let mut late_nul = b"match\n".to_vec();
    late_nul.extend(std::iter::repeat_n(
        b'z',
        crate::tools::common::BINARY_SNIFF_BYTES,
    ));
    late_nul.push(0);
    h.put("b.dat", &late_nul);
    h.put("c.md", "match\n");
    assert_eq!(
        grep(&h, json!({"pattern": "match"})).await,
        matches(&["b.dat:1:match", "c.md:1:match"])
    );
}

async fn oversize_files_are_skipped_and_flagged(backend: Backend) {
    let h = backend.harness(|options| options.max_file_bytes = 10);
    h.put("big.md", "match 4567\nmatch\n");
    h.put("small.md", "match\n");
    assert_eq!(
        grep(&h, json!({"pattern": "match"})).await,
        json!({"matches": ["small.md:1:match"], "truncated": true})
    );
}

async fn files_over_the_read_cap_are_skipped_and_flagged(backend: Backend) {
    // A read cap below the file size cap: the lower of the two applies.
    let h = backend.harness(|options| options.max_read_bytes = 10);
    h.put("big.md", "match 4567\nmatch\n");
    h.put("fits.md", "012\nmatch\n");
    assert_eq!(
        grep(&h, json!({"pattern": "match"})).await,
        json!({"matches": ["fits.md:2:match"], "truncated": true})
    );
}

/// A store whose listing says every file is 1 byte: files that grew after grep listed
/// them.
struct ListsSmall(MemoryStorage);

impl Storage for ListsSmall {
    fn read(&self, path: &str) -> Result<crate::vfs::FileContent, StorageError> {
        self.0.read(path)
    }
    fn read_capped(
        &self,
        path: &str,
        max_bytes: u64,
    ) -> Result<crate::vfs::FileContent, StorageError> {
        self.0.read_capped(path, max_bytes)
    }
    fn write(&self, path: &str, content: &[u8], content_type: &str) -> Result<(), StorageError> {
        self.0.write(path, content, content_type)
    }
    fn delete(&self, path: &str) -> Result<(), StorageError> {
        self.0.delete(path)
    }
    fn list(&self) -> Result<Vec<FileEntry>, StorageError> {
        let mut listed = self.0.list()?;
        for entry in &mut listed {
            entry.size = 1;
        }
        Ok(listed)
    }
}

#[tokio::test]
async fn a_file_that_grew_past_the_cap_after_the_listing_is_skipped_unread() {
    let storage = ListsSmall(MemoryStorage::new());
    storage
        .0
        .write("big.md", b"match 4567\nmatch\n", "")
        .unwrap();
    storage.0.write("fits.md", b"match\n", "").unwrap();
    let registry = crate::registry::Registry::new();
    let mut options = crate::tools::VfsToolOptions::new(std::sync::Arc::new(storage));
    options.max_file_bytes = 10;
    crate::tools::register_vfs_tools(&registry, options).unwrap();
    let result = registry
        .dispatch(
            &CallContext::new(),
            &crate::registry::ToolCall::new("grep", json!({"pattern": "match"}).to_string()),
            &crate::registry::Environment::default(),
        )
        .await
        .unwrap();
    assert_eq!(
        result.content,
        json!({"matches": ["fits.md:1:match"], "truncated": true})
    );
}

async fn long_line_is_cut_at_500(backend: Backend) {
    let h = backend.default_harness();
    let line = format!("needle{}", "é".repeat(594));
    h.put("a.md", format!("{line}\n"));
    let result = grep(&h, json!({"pattern": "needle"})).await;
    let expected = format!("a.md:1:needle{}", "é".repeat(494));
    assert_eq!(result, json!({"matches": [expected], "truncated": false}));
}

async fn entry_limit_at_201(backend: Backend) {
    let h = backend.default_harness();
    let lines: String = (1..=201).map(|i| format!("m{i}\n")).collect();
    h.put("a.md", &lines);
    let result = grep(&h, json!({"pattern": "^m"})).await;
    let expected: Vec<String> = (1..=200).map(|i| format!("a.md:{i}:m{i}")).collect();
    assert_eq!(result, json!({"matches": expected, "truncated": true}));
    // Exactly 200 fit.
    let lines: String = (1..=200).map(|i| format!("m{i}\n")).collect();
    h.put("a.md", &lines);
    let result = grep(&h, json!({"pattern": "^m"})).await;
    assert_eq!(result, json!({"matches": expected, "truncated": false}));
    // The limit spans files too.
    h.put("b.md", "m\n");
    let result = grep(&h, json!({"pattern": "^m"})).await;
    assert_eq!(result, json!({"matches": expected, "truncated": true}));
}

async fn entry_limit_across_many_files(backend: Backend) {
    let h = backend.default_harness();
    for i in (0..260).rev() {
        h.put(&format!("f{i:03}.md"), "x\nhit\n");
    }
    let result = grep(&h, json!({"pattern": "hit"})).await;
    let expected: Vec<String> = (0..200).map(|i| format!("f{i:03}.md:2:hit")).collect();
    assert_eq!(result, json!({"matches": expected, "truncated": true}));
    let result = grep(
        &h,
        json!({"pattern": "hit", "output_mode": "files_with_matches"}),
    )
    .await;
    let expected: Vec<String> = (0..200).map(|i| format!("f{i:03}.md")).collect();
    assert_eq!(result, json!({"files": expected, "truncated": true}));
}

async fn result_budget_cuts_long_entries(backend: Backend) {
    let h = backend.default_harness();
    let lines: String = (0..100).map(|_| format!("{}\n", "x".repeat(500))).collect();
    h.put("a.md", &lines);
    let result = grep(&h, json!({"pattern": "x"})).await;
    // Each entry counts with its quotes and a comma.
    let (mut used, mut fit) = (0, Vec::new());
    for i in 1..=100 {
        let entry = format!("a.md:{i}:{}", "x".repeat(500));
        used += entry.len() + 3;
        if used > RESULT_BUDGET {
            break;
        }
        fit.push(entry);
    }
    assert_eq!(fit.len(), 80);
    assert_eq!(result, json!({"matches": fit, "truncated": true}));
}

async fn invalid_arguments_are_refused(backend: Backend) {
    let h = backend.default_harness();
    let message = invalid_arguments(h.call("grep", json!({"pattern": "a(b"})).await);
    assert!(
        message.starts_with(
            "argument \"pattern\" is not a valid regular expression (RE2 syntax): regex parse error:"
        ),
        "{message}"
    );
    assert!(message.contains("unclosed group"), "{message}");
    let message = invalid_arguments(h.call("grep", json!({"pattern": "a", "context": 6})).await);
    assert_eq!(message, "argument \"context\" must be 0 to 5 lines, got 6");
    let message = invalid_arguments(h.call("grep", json!({"pattern": "a", "context": -1})).await);
    assert_eq!(message, "argument \"context\" must be 0 or more, got -1");
    let message = invalid_arguments(h.call("grep", json!({})).await);
    assert_eq!(message, "argument \"pattern\" is required");
}

async fn policy_hidden_files_are_not_searched(backend: Backend) {
    let h = backend.harness(|options| {
        options.hide_hidden_paths = true;
        options.allowed_extensions = Some(vec![".md".into()]);
    });
    for path in ["a.md", ".env.md", "_x/b.md", "c.txt"] {
        h.put(path, "secret\n");
    }
    assert_eq!(
        grep(&h, json!({"pattern": "secret"})).await,
        matches(&["a.md:1:secret"])
    );
}

async fn reports_progress_per_file_when_asked(backend: Backend) {
    use crate::registry::{CallContext, Environment, Progress, ProgressHook, ToolCall};
    use std::sync::{Arc, Mutex};
    let h = backend.default_harness();
    for i in 0..30 {
        h.put(&format!("f{i:02}.md"), "hit\n");
    }
    let seen: Arc<Mutex<Vec<Progress>>> = Arc::default();
    let sink = Arc::clone(&seen);
    let ctx =
        CallContext::new().with_progress(ProgressHook::new(move |p| sink.lock().unwrap().push(p)));
    let result = h
        .registry
        .dispatch(
            &ctx,
            &ToolCall::new("grep", r#"{"pattern":"hit","output_mode":"count"}"#),
            &Environment::default(),
        )
        .await
        .unwrap();
    assert_eq!(result.content["truncated"], false);
    let seen = seen.lock().unwrap().clone();
    // One report per file scanned, counting up to the total, whichever thread scanned it.
    let mut done: Vec<f64> = seen.iter().map(|p| p.progress).collect();
    done.sort_by(f64::total_cmp);
    assert_eq!(done, (1..=30).map(f64::from).collect::<Vec<_>>());
    assert!(seen.iter().all(|p| p.total == Some(30.0)), "{seen:?}");
    assert!(
        seen.iter()
            .any(|p| p.message.as_deref() == Some("grep: 30 of 30 files scanned")),
        "{seen:?}"
    );
    // Without a hook nothing is counted or reported (and the answer is the same).
    let plain = grep(&h, json!({"pattern":"hit","output_mode":"count"})).await;
    assert_eq!(plain, result.content);
}

backend_tests!(
    reports_progress_per_file_when_asked,
    content_lines_in_path_order,
    context_lines,
    output_modes,
    case_insensitive,
    path_glob_filters_files,
    dollar_anchors_each_line,
    binary_files_are_skipped,
    oversize_files_are_skipped_and_flagged,
    files_over_the_read_cap_are_skipped_and_flagged,
    long_line_is_cut_at_500,
    entry_limit_at_201,
    entry_limit_across_many_files,
    result_budget_cuts_long_entries,
    invalid_arguments_are_refused,
    policy_hidden_files_are_not_searched,
);

/// A count-mode search of `storage` for `x`, with this scan budget.
fn counting(storage: &MemoryStorage, budget: u64) -> Search<'_> {
    Search {
        storage,
        regex: Regex::new("x").unwrap(),
        mode: Mode::Count,
        max_bytes: u64::MAX,
        budget,
    }
}

fn sized(storage: &MemoryStorage, path: &str, size: usize) {
    storage
        .write(path, "x".repeat(size).as_bytes(), "")
        .unwrap();
}

/// Paths and counts of a count-mode output.
fn counted(output: &Output) -> Vec<String> {
    output
        .entries
        .iter()
        .map(|e| format!("{}={}", e["path"].as_str().unwrap(), e["count"]))
        .collect()
}

/// A whole scan of `files` as one chunk.
fn scan(search: &Search<'_>, files: &[String], ctx: &CallContext) -> Output {
    with_scan(search, ctx, |scan| {
        scan.chunk(&mut files.to_vec(), Some(files.len() as u64));
        scan.finish()
    })
}

/// The output of a merge of `slots` from the start.
fn merged(
    search: &Search<'_>,
    files: &[String],
    slots: Vec<OnceLock<Scanned>>,
    ctx: &CallContext,
) -> Output {
    let mut output = Output::default();
    merge(search, files, slots, ctx, &mut output, &mut 0);
    output
}

#[test]
fn scan_budget_stops_before_the_file_that_would_pass_it() {
    let storage = MemoryStorage::new();
    for (path, size) in [("c", 40), ("a", 30), ("b", 30), ("d", 1)] {
        sized(&storage, path, size);
    }
    let files = storage.list_paths().unwrap();
    assert_eq!(files, ["a", "b", "c", "d"]);
    let output = scan(&counting(&storage, 60), &files, &CallContext::new());
    assert_eq!(
        (counted(&output), output.truncated),
        (vec!["a=1".into(), "b=1".into()], true)
    );
    let output = scan(&counting(&storage, 101), &files, &CallContext::new());
    assert_eq!(
        (counted(&output), output.truncated),
        (
            vec!["a=1".into(), "b=1".into(), "c=1".into(), "d=1".into()],
            false
        )
    );
}

/// Whatever the threads read first, the budget applies in path order: a file a thread
/// deferred is read by the merge if it fits there, and a file a thread already read is
/// dropped if it does not.
#[test]
fn merge_applies_the_budget_in_path_order() {
    let storage = MemoryStorage::new();
    sized(&storage, "a", 5);
    sized(&storage, "b", 30);
    sized(&storage, "c", 1);
    let search = counting(&storage, 32);
    let files: Vec<String> = ["a", "b", "c"].map(String::from).to_vec();
    // As if a thread read b (30 bytes) first, so a (5) did not fit the claim and was
    // deferred, and nobody took c.
    let slots: Vec<OnceLock<Scanned>> = vec![
        OnceLock::from(Scanned {
            size: 5,
            hits: Hits::Deferred,
        }),
        OnceLock::from(Scanned {
            size: 30,
            hits: Hits::Count(1),
        }),
        OnceLock::new(),
    ];
    let output = merged(&search, &files, slots, &CallContext::new());
    assert_eq!(
        (counted(&output), output.truncated),
        (vec!["a=1".into()], true)
    );

    // With room for all three, the deferred and the untaken files are read here.
    let search = counting(&storage, 36);
    let slots = vec![
        OnceLock::from(Scanned {
            size: 5,
            hits: Hits::Deferred,
        }),
        OnceLock::from(Scanned {
            size: 30,
            hits: Hits::Count(7),
        }),
        OnceLock::new(),
    ];
    let output = merged(&search, &files, slots, &CallContext::new());
    assert_eq!(
        (counted(&output), output.truncated),
        (vec!["a=1".into(), "b=7".into(), "c=1".into()], false)
    );

    // An expired call reads nothing more: the output stops, incomplete.
    let slots = vec![
        OnceLock::from(Scanned {
            size: 5,
            hits: Hits::Count(2),
        }),
        OnceLock::new(),
        OnceLock::new(),
    ];
    let output = merged(
        &search,
        &files,
        slots,
        &CallContext::with_timeout(Duration::ZERO),
    );
    assert_eq!(
        (counted(&output), output.truncated),
        (vec!["a=2".into()], true)
    );
}

/// Many files and a budget that runs out mid-way, on every thread count the machine
/// gives: the same answer as a scan in path order, every time.
#[test]
fn scan_budget_is_exact_whatever_the_threads_do() {
    let storage = MemoryStorage::new();
    let mut expected = Vec::new();
    let mut total = 0;
    let mut stopped = false;
    for i in 0..300usize {
        let size = 1 + (i * 37) % 100;
        let path = format!("f{i:03}");
        sized(&storage, &path, size);
        if !stopped && total + size <= 10_000 {
            total += size;
            expected.push(format!("{path}=1"));
        } else {
            stopped = true;
        }
    }
    let files = storage.list_paths().unwrap();
    for _ in 0..20 {
        let output = scan(&counting(&storage, 10_000), &files, &CallContext::new());
        assert_eq!(counted(&output), expected);
        assert!(output.truncated);
    }
}

#[test]
fn expired_call_stops_and_flags() {
    let storage = MemoryStorage::new();
    storage.write("a.md", b"x\n", "").unwrap();
    let search = Search {
        storage: &storage,
        regex: Regex::new("x").unwrap(),
        mode: Mode::Content { context: 0 },
        max_bytes: u64::MAX,
        budget: SCAN_BUDGET,
    };
    let files = vec!["a.md".to_owned()];
    let output = scan(&search, &files, &CallContext::with_timeout(Duration::ZERO));
    assert!(output.entries.is_empty());
    assert!(output.truncated);
    let output = scan(&search, &files, &CallContext::new());
    assert_eq!(output.entries, [json!("a.md:1:x")]);
    assert!(!output.truncated);
}

/// One scan fed many chunks (the same helpers serve every one, each chunk scanned while
/// the next is handed in): the answer of one scan in path order, with the budget and
/// the output carried across the chunks' seams.
#[test]
fn chunks_of_one_scan_join_into_the_path_order_answer() {
    let storage = MemoryStorage::new();
    let mut expected = Vec::new();
    let mut total = 0;
    for i in 0..300usize {
        let size = 1 + (i * 37) % 100;
        let path = format!("f{i:03}");
        sized(&storage, &path, size);
        if total + size <= 10_000 && expected.len() == i {
            total += size;
            expected.push(format!("{path}=1"));
        }
    }
    let files = storage.list_paths().unwrap();
    let ctx = CallContext::new();
    for chunk_files in [1, 7, 64, 300] {
        let search = counting(&storage, 10_000);
        let (output, more) = with_scan(&search, &ctx, |scan| {
            let mut more = true;
            let mut chunks = files.chunks(chunk_files).peekable();
            while let Some(chunk) = chunks.next() {
                let mut chunk = chunk.to_vec();
                // The last chunk comes with the number of files in all.
                let total = chunks.peek().is_none().then_some(files.len() as u64);
                more = scan.chunk(&mut chunk, total);
                assert!(chunk.is_empty(), "the chunk is handed back empty");
                if !more {
                    break;
                }
            }
            (scan.finish(), more)
        });
        assert_eq!(counted(&output), expected, "chunks of {chunk_files}");
        assert!(output.truncated, "chunks of {chunk_files}");
        assert!(!more, "chunks of {chunk_files}");
    }
}
