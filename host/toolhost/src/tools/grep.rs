//! The `grep` tool: search file contents with a regular expression.
//!
//! Arguments: `pattern` (required; RE2 syntax, the `regex` crate), `path_glob` (which
//! files to scan, glob syntax as the `glob` tool), `case_insensitive`, `context` (0 to 5
//! lines around each match, content mode only) and `output_mode`:
//!
//! | `output_mode`          | result                                                        |
//! |------------------------|---------------------------------------------------------------|
//! | `content` (default)    | `{"matches": ["a.md:3:text", "a.md-4-context"], "truncated": false}` |
//! | `files_with_matches`   | `{"files": ["a.md", "b/c.md"], "truncated": false}`           |
//! | `count`                | `{"counts": [{"path": "a.md", "count": 2}], "truncated": false}` |
//!
//! Rules:
//! - Files are scanned in path order; only files the path policy shows, matching
//!   `path_glob` if given. Output follows the same order whatever the parallelism.
//! - A match is reported by line: `path:line:text` (1-based line numbers), context lines
//!   `path-line-text`, each line once. `^` and `$` anchor at every line (`\r\n` ends count
//!   as line ends), and a match must lie within one line. `count` counts matching lines;
//!   files without a match are left out of `files` and `counts`.
//! - Limits: at most [`MAX_ENTRIES`] entries (matches and context lines together, or
//!   files, or counts) and [`RESULT_BUDGET`] bytes of entries as JSON; lines cut at 500
//!   characters (`lines::MAX_LINE_CHARS`). Files listed larger than `maximum_file_bytes`
//!   (or than the tools' `max_read_bytes`, when that is lower) are skipped unread; the
//!   scan stops before a file that would take the bytes read past [`SCAN_BUDGET`]. Each
//!   read is capped at the same size ([`Storage::read_capped`]), so a file that grew after
//!   the listing is skipped too, before any memory is taken for it. Binary files (a NUL byte in the first 8 KiB, `common::is_binary`, the rule read_file
//!   refuses them by) are
//!   skipped. `truncated` is true when an entry limit cut the output, the scan stopped
//!   early, or a file was skipped for its size or could not be read; binary files do not
//!   set it.
//! - Each scanned file is read whole (the Storage has no ranged read). Scanning runs on
//!   the blocking pool, on up to [`MAX_WORKERS`] threads, and stops between files once the
//!   call's deadline passes.

use crate::registry::ToolAnnotations;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use globset::GlobMatcher;
use regex::bytes::Regex;
use serde_json::{json, Value};
use toolhost_sdk::schema::{boolean, enumeration, integer, object, string};

use super::common::{is_binary, storage_error};
use super::register_file_tool;
use super::{blocking, FileTools};
use crate::registry::{
    Arguments, CallContext, RegisterError, Registry, ToolDefinition, ToolError, ToolResult,
};
use crate::vfs::{FileEntry, FilePolicy, Storage, StorageError};

mod lines;

const NAME: &str = "grep";
/// The display title (MCP `title`), one of [`RESERVED_TOOL_TITLES`](crate::registry::RESERVED_TOOL_TITLES).
const TITLE: &str = "Search file contents";

/// At most this many entries in one result.
pub const MAX_ENTRIES: usize = 200;

/// At most this many bytes of entries, JSON-encoded, in one result: 200 lines of 500
/// characters would pass the registry's default 64 KiB result cap, and a result over the
/// cap reaches the model as an error instead of as a cut list. The same 40 KiB the
/// read_file window uses.
pub const RESULT_BUDGET: usize = 40 * 1024;

/// A scan stops before a file that would take the bytes read past 32 MiB, so one call's
/// I/O and time stay bounded whatever the store holds.
pub const SCAN_BUDGET: u64 = 32 * 1024 * 1024;

/// Most threads one call scans with; also bounded by the machine's parallelism.
pub const MAX_WORKERS: usize = 4;

/// Most context lines before and after a match.
const MAX_CONTEXT: u64 = 5;

const DESCRIPTION: &str = "Search the contents of files with a regular expression (RE2 \
syntax: no look-around or backreferences; escape regex characters such as . ( [ { with \\ to \
match them literally). ^ and $ anchor at the start and end of each line, and a match must lie \
within one line. path_glob limits which files are searched (\"**/*.md\", \"docs/*.txt\"); \
case_insensitive ignores case; context (0-5) adds that many lines before and after each match. \
output_mode: \"content\" (default) returns {\"matches\": [...], \"truncated\"} with entries \
\"path:line:text\" for matching lines and \"path-line-text\" for context lines; \
\"files_with_matches\" returns {\"files\": [paths]}; \"count\" returns {\"counts\": [{\"path\", \
\"count\"}]} (matching lines per file). Files are searched in path order; binary files are \
skipped. At most 200 entries; lines longer than 500 characters are cut. truncated: true means \
the output is incomplete (too many results, too much data scanned, or files skipped for their \
size): narrow the pattern or path_glob. Use read_file to see more of a file.";

/// What a call asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Content { context: usize },
    FilesWithMatches,
    Count,
}

/// Registers `grep`.
pub(super) fn register(registry: &Registry, tools: &Arc<FileTools>) -> Result<(), RegisterError> {
    let parameters = object(
        [
            (
                "pattern",
                string("Regular expression (RE2 syntax) to search for."),
            ),
            (
                "path_glob",
                string("Only search files whose path matches this glob, e.g. \"**/*.md\"."),
            ),
            (
                "case_insensitive",
                boolean("Ignore case (default false)."),
            ),
            (
                "context",
                integer("Lines of context before and after each match, 0 to 5 (default 0; content mode only)."),
            ),
            (
                "output_mode",
                enumeration(
                    "content (matching lines, default), files_with_matches (paths only) or count (matching lines per file).",
                    ["content", "files_with_matches", "count"],
                ),
            ),
        ],
        ["pattern"],
    );
    register_file_tool(
        registry,
        tools,
        ToolDefinition::new(NAME, DESCRIPTION, parameters)
            .with_title(TITLE)
            .with_annotations(ToolAnnotations::read_only()),
        |tools, ctx, args| async move { run(tools, ctx, args).await },
    )
}

async fn run(
    tools: Arc<FileTools>,
    ctx: CallContext,
    args: Arguments,
) -> Result<ToolResult, ToolError> {
    let pattern = args.required_str("pattern")?;
    let case_insensitive = args.optional_bool("case_insensitive")?.unwrap_or(false);
    // Size caps on both patterns, checked before and while compiling: tools/pattern.rs.
    let regex = super::pattern::grep_regex(&args, "pattern", pattern, case_insensitive)?;
    let glob = match args.optional_str("path_glob")? {
        None => None,
        Some(glob) => Some(super::pattern::glob_matcher(&args, "path_glob", glob)?),
    };
    let context = match args.optional_u64("context")? {
        None => 0,
        Some(n) if n <= MAX_CONTEXT => n as usize,
        Some(n) => {
            return Err(args.invalid(format!(
                "argument \"context\" must be 0 to {MAX_CONTEXT} lines, got {n}"
            )))
        }
    };
    let mode = match args.optional_str("output_mode")? {
        None | Some("content") => Mode::Content { context },
        Some("files_with_matches") => Mode::FilesWithMatches,
        Some("count") => Mode::Count,
        Some(other) => {
            return Err(args.invalid(format!(
                "argument \"output_mode\" must be one of content, files_with_matches, count; got {other:?}"
            )))
        }
    };
    blocking(move || {
        let listed = tools
            .storage
            .list()
            .map_err(|err| storage_error(NAME, err))?;
        let max_bytes = tools.policy.maximum_file_bytes.min(tools.max_read_bytes);
        let (files, skipped) = plan(listed, &tools.policy, glob.as_ref(), SCAN_BUDGET, max_bytes);
        let search = Search {
            storage: tools.storage.as_ref(),
            regex,
            mode,
            max_bytes,
        };
        let mut output = scan(&search, &files, &ctx);
        output.truncated |= skipped;
        Ok(ToolResult::new(output.into_json(mode)))
    })
    .await
}

/// The files to scan, in path order: visible, matching `glob`, not over `max_bytes`,
/// within `budget` bytes in all. The flag says whether any file was left out for its size
/// or the budget.
fn plan(
    mut listed: Vec<FileEntry>,
    policy: &FilePolicy,
    glob: Option<&GlobMatcher>,
    budget: u64,
    max_bytes: u64,
) -> (Vec<FileEntry>, bool) {
    listed.sort_unstable_by(|a, b| a.path.cmp(&b.path));
    let mut files = Vec::new();
    let mut total = 0u64;
    let mut skipped = false;
    for entry in listed {
        if !policy.visible(&entry.path) || glob.is_some_and(|glob| !glob.is_match(&entry.path)) {
            continue;
        }
        if entry.size > max_bytes {
            skipped = true;
            continue;
        }
        if total + entry.size > budget {
            skipped = true;
            break;
        }
        total += entry.size;
        files.push(entry);
    }
    (files, skipped)
}

/// What every scanning thread shares.
struct Search<'a> {
    storage: &'a dyn Storage,
    regex: Regex,
    mode: Mode,
    /// The most one file may hold to be read.
    max_bytes: u64,
}

/// What one file gave.
#[derive(Debug)]
enum Hits {
    /// Content-mode entries.
    Lines(Vec<String>),
    /// Matching lines (count mode).
    Count(u64),
    /// At least one matching line (files_with_matches mode).
    Matched,
    /// Binary, gone since the listing, or without a match.
    Nothing,
    /// A read failed for another reason (the file grew past the cap since the listing,
    /// say): left out, and the output is incomplete.
    Unreadable,
}

impl Hits {
    /// How many entries these hits make, and a lower bound of their JSON-encoded bytes
    /// as [`Output::push`] counts them (escapes only add to it).
    fn least_weight(&self, path: &str) -> (usize, usize) {
        match self {
            Hits::Lines(lines) => (lines.len(), lines.iter().map(|line| line.len() + 3).sum()),
            Hits::Count(0) | Hits::Nothing | Hits::Unreadable => (0, 0),
            Hits::Count(_) | Hits::Matched => (1, path.len() + 3),
        }
    }
}

impl Search<'_> {
    fn file(&self, regex: &Regex, path: &str) -> Hits {
        let buf = match self.storage.read_capped(path, self.max_bytes) {
            Ok(file) => file.content,
            Err(StorageError::NotFound { .. }) => return Hits::Nothing,
            Err(_) => return Hits::Unreadable,
        };
        if is_binary(&buf) {
            return Hits::Nothing;
        }
        match self.mode {
            Mode::Content { context } => Hits::Lines(lines::content_entries(
                regex,
                path,
                &buf,
                context,
                MAX_ENTRIES + 1,
            )),
            Mode::FilesWithMatches => match lines::MatchingLines::new(regex, &buf).next() {
                Some(_) => Hits::Matched,
                None => Hits::Nothing,
            },
            Mode::Count => Hits::Count(lines::MatchingLines::new(regex, &buf).count() as u64),
        }
    }
}

/// Scans `files` on up to [`MAX_WORKERS`] threads and merges their hits in file order.
///
/// Threads take the next file from a shared counter and put its hits in that file's slot;
/// the merge walks the slots in order once they are done. Threads stop taking files when
/// the call expires, or when the files finished so far already hold more than the output
/// can take: every file they finished comes before any file not yet taken, so the merged
/// output is full before it would reach the untaken ones.
fn scan(search: &Search<'_>, files: &[FileEntry], ctx: &CallContext) -> Output {
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(MAX_WORKERS)
        .min(files.len())
        .max(1);
    let next = AtomicUsize::new(0);
    let found_entries = AtomicUsize::new(0);
    let found_bytes = AtomicUsize::new(0);
    let slots: Vec<OnceLock<Hits>> = files.iter().map(|_| OnceLock::new()).collect();
    let work = |regex: Regex| {
        while !ctx.expired()
            && found_entries.load(Ordering::Relaxed) <= MAX_ENTRIES
            && found_bytes.load(Ordering::Relaxed) <= RESULT_BUDGET
        {
            let index = next.fetch_add(1, Ordering::Relaxed);
            let Some(entry) = files.get(index) else {
                break;
            };
            let hits = search.file(&regex, &entry.path);
            let (entries, bytes) = hits.least_weight(&entry.path);
            found_entries.fetch_add(entries, Ordering::Relaxed);
            found_bytes.fetch_add(bytes, Ordering::Relaxed);
            let _ = slots[index].set(hits);
        }
    };
    std::thread::scope(|scope| {
        let work = &work;
        for _ in 1..workers {
            // A clone per thread: each gets its own match cache instead of sharing a pool.
            let regex = search.regex.clone();
            scope.spawn(move || work(regex));
        }
        work(search.regex.clone());
    });
    let mut output = Output::default();
    for (entry, slot) in files.iter().zip(slots) {
        let Some(hits) = slot.into_inner() else {
            // Not scanned: the call expired (or the output is already full).
            output.truncated = true;
            break;
        };
        if !output.add(&entry.path, hits) {
            break;
        }
    }
    output
}

/// The merged result.
#[derive(Debug, Default)]
struct Output {
    entries: Vec<Value>,
    /// JSON-encoded size of `entries` so far.
    bytes: usize,
    truncated: bool,
}

impl Output {
    /// Adds one file's hits; false once the output is full (and then `truncated` is set).
    fn add(&mut self, path: &str, hits: Hits) -> bool {
        match hits {
            Hits::Lines(lines) => lines.into_iter().all(|line| self.push(Value::String(line))),
            Hits::Count(0) | Hits::Nothing => true,
            Hits::Count(count) => self.push(json!({"path": path, "count": count})),
            Hits::Matched => self.push(Value::String(path.to_owned())),
            Hits::Unreadable => {
                self.truncated = true;
                true
            }
        }
    }

    fn push(&mut self, entry: Value) -> bool {
        // The entry plus the comma that separates it from the one before.
        let size = encoded_len(&entry) + 1;
        if self.entries.len() == MAX_ENTRIES || self.bytes + size > RESULT_BUDGET {
            self.truncated = true;
            return false;
        }
        self.bytes += size;
        self.entries.push(entry);
        true
    }

    fn into_json(self, mode: Mode) -> Value {
        let Output {
            entries, truncated, ..
        } = self;
        match mode {
            Mode::Content { .. } => json!({"matches": entries, "truncated": truncated}),
            Mode::Count => json!({"counts": entries, "truncated": truncated}),
            Mode::FilesWithMatches => json!({"files": entries, "truncated": truncated}),
        }
    }
}

fn encoded_len(value: &Value) -> usize {
    serde_json::to_string(value).map_or(0, |text| text.len())
}

#[cfg(test)]
mod tests;
