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
//!   characters (`lines::MAX_LINE_CHARS`). Files larger than `max_file_bytes` (or
//!   than the tools' `max_read_bytes`, when that is lower) are skipped unread; in path
//!   order, the scan stops before a file that would take the bytes read past
//!   [`SCAN_BUDGET`]. A file's size is taken from its open handle
//!   ([`Storage::open_read`]), so a file that grew after the listing counts at its new
//!   size, and is skipped before any memory is taken for it. Binary files (a NUL byte in
//!   the first 8 KiB, `common::is_binary`, the rule read_file refuses them by) are
//!   skipped. `truncated` is true when an entry limit cut the output, the scan stopped
//!   early, or a file was skipped for its size or could not be read; binary files do not
//!   set it.
//! - The files are listed by path only, as a stream in path order
//!   ([`Storage::visit_paths`]: no `stat` per file on an
//!   [`OsStorage`](crate::vfs::OsStorage), and never the whole listing at once), and
//!   scanned `CHUNK_FILES` (2,048) at a time as the walk goes, the helpers scanning one
//!   chunk while the calling thread lists the next (`grep/scan.rs`): the output and the
//!   bytes read carry from one chunk to the next, and the walk stops once the output is
//!   full or the scan budget spent (seen when the chunk in flight is merged, one chunk
//!   of listing later). Each scanned file is read whole into a buffer each scanning
//!   thread reuses (the Storage has no ranged read). Scanning runs on the blocking pool
//!   under the [walk budget](super::walks), on up to [`MAX_WORKERS`] threads (the
//!   calling one and helpers started at the first chunk that serve every chunk of the
//!   call, `grep/crew.rs`: no thread is started per chunk), and stops
//!   between files once the call's deadline passes or it is cancelled. Progress reports
//!   give the number of files in all only once the listing is complete.

use crate::registry::encoded_len;
use crate::registry::ToolAnnotations;
use std::ops::ControlFlow;
use std::sync::Arc;

use regex::bytes::Regex;
use serde_json::{json, Value};
use toolhost_sdk::schema::{boolean, enumeration, integer, object, string};

use super::common::is_binary;
use super::register_file_tool;
use super::{stopped, visit_shown, walk, FileTools};
use crate::registry::{
    Arguments, CallContext, RegisterError, Registry, ToolDefinition, ToolError, ToolResult,
};
use crate::vfs::{OpenedFile, Storage, StorageError};

mod crew;
mod lines;
mod scan;

use scan::with_scan;

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

/// Files the walk hands to the scanning threads at a time: the listing is never held
/// whole, only two chunks of paths (the one being scanned, with its hits, and the one
/// being listed), 4,096 paths as one chunk of 4,096 held before the listing overlapped
/// the scan.
const CHUNK_FILES: usize = 2048;

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
    let budget = Arc::clone(&tools.walks);
    walk(&budget, NAME, ctx, move |ctx| {
        let search = Search {
            storage: tools.storage.as_ref(),
            regex,
            mode,
            max_bytes: tools.policy.max_file_bytes.min(tools.max_read_bytes),
            budget: SCAN_BUDGET,
        };
        let output = with_scan(&search, ctx, |scan| {
            let mut chunk: Vec<String> = Vec::new();
            let mut listed = 0u64;
            let wanted = |path: &str| glob.as_ref().is_none_or(|g| g.is_match(path));
            let expired = visit_shown(&tools, ctx, NAME, wanted, |path| {
                listed += 1;
                chunk.push(path);
                if chunk.len() < CHUNK_FILES || scan.chunk(&mut chunk, None) {
                    ControlFlow::Continue(())
                } else {
                    ControlFlow::Break(())
                }
            })?;
            if !expired {
                // The listing is complete: the files left, and how many there were in all.
                scan.chunk(&mut chunk, Some(listed));
            }
            Ok(scan.finish())
        })?;
        // A call that expired on the way gets its time-out or cancellation, never a
        // partial answer that would race with the registry's.
        if ctx.expired() {
            return Err(stopped(ctx, NAME));
        }
        Ok(ToolResult::new(output.into_json(mode)))
    })
    .await
}

/// What every scanning thread shares.
struct Search<'a> {
    storage: &'a dyn Storage,
    regex: Regex,
    mode: Mode,
    /// The most one file may hold to be read.
    max_bytes: u64,
    /// The most bytes one call reads ([`SCAN_BUDGET`]).
    budget: u64,
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
    /// Larger than the most one file may hold: skipped unread, and the output is
    /// incomplete.
    TooLarge,
    /// Opened but not read: its bytes did not fit the scan budget when the scanning
    /// thread asked (the merge decides, in path order).
    Deferred,
    /// A read failed for another reason (the file grew past the cap since it was
    /// opened, say): left out, and the output is incomplete.
    Unreadable,
}

/// A file's hits and the bytes it takes from the scan budget (its size when opened;
/// nothing if it was not opened, or was too large to read).
#[derive(Debug)]
struct Scanned {
    size: u64,
    hits: Hits,
}

impl Scanned {
    fn unread(hits: Hits) -> Self {
        Scanned { size: 0, hits }
    }
}

impl Hits {
    /// How many entries these hits make, and a lower bound of their JSON-encoded bytes
    /// as [`Output::push`] counts them (escapes only add to it).
    fn least_weight(&self, path: &str) -> (usize, usize) {
        match self {
            Hits::Lines(lines) => (lines.len(), lines.iter().map(|line| line.len() + 3).sum()),
            Hits::Count(0) | Hits::Nothing | Hits::TooLarge | Hits::Deferred | Hits::Unreadable => {
                (0, 0)
            }
            Hits::Count(_) | Hits::Matched => (1, path.len() + 3),
        }
    }
}

impl Search<'_> {
    /// Opens `path`, and if `admit` accepts its size, reads it into `buf` and searches
    /// it; a size `admit` refuses is [`Hits::Deferred`].
    fn file(
        &self,
        regex: &Regex,
        path: &str,
        buf: &mut Vec<u8>,
        admit: impl FnOnce(u64) -> bool,
    ) -> Scanned {
        let file = match self.storage.open_read(path, self.max_bytes) {
            Ok(file) => file,
            Err(StorageError::NotFound { .. }) => return Scanned::unread(Hits::Nothing),
            Err(StorageError::FileTooLarge { .. }) => return Scanned::unread(Hits::TooLarge),
            Err(_) => return Scanned::unread(Hits::Unreadable),
        };
        let size = file.size();
        let hits = if admit(size) {
            self.read(regex, path, file, buf)
        } else {
            Hits::Deferred
        };
        Scanned { size, hits }
    }

    /// Reads an opened file into `buf` and searches it.
    fn read(
        &self,
        regex: &Regex,
        path: &str,
        file: Box<dyn OpenedFile + '_>,
        buf: &mut Vec<u8>,
    ) -> Hits {
        match file.read_into(buf) {
            Ok(()) => {}
            Err(StorageError::NotFound { .. }) => return Hits::Nothing,
            Err(_) => return Hits::Unreadable,
        }
        if is_binary(buf) {
            return Hits::Nothing;
        }
        match self.mode {
            Mode::Content { context } => Hits::Lines(lines::content_entries(
                regex,
                path,
                buf,
                context,
                MAX_ENTRIES + 1,
            )),
            Mode::FilesWithMatches => match lines::MatchingLines::new(regex, buf).next() {
                Some(_) => Hits::Matched,
                None => Hits::Nothing,
            },
            Mode::Count => Hits::Count(lines::MatchingLines::new(regex, buf).count() as u64),
        }
    }
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
            // The merge handles TooLarge and Deferred before it adds.
            Hits::TooLarge | Hits::Deferred | Hits::Unreadable => {
                self.truncated = true;
                true
            }
            Hits::Count(count) => self.push(json!({"path": path, "count": count})),
            Hits::Matched => self.push(Value::String(path.to_owned())),
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

#[cfg(test)]
mod tests;
