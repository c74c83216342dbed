//! The `read_file` tool: a window of a text file, with numbered lines.
//!
//! One call shows at most [`MAX_LINES`] lines and at most [`MAX_CONTENT_BYTES`] of content
//! as JSON-encoded, so the result always fits the registry's 64 KiB result cap. The whole
//! file is read on every call (the storage has no ranged read), and the window is found in
//! one linear pass: a 16 MiB file costs a few scans of 16 MiB per call, never more.
//!
//! Decisions where the spec is silent:
//! - Lines end at `\n`; a `\r` before it stays part of the line. A final line without a
//!   newline still counts, and every shown line ends in `\n` in `content`.
//! - An empty file has 0 lines; offset 1 (the default) gives empty content, any other
//!   offset is past the end.
//! - A file with a NUL byte in its first 8 KiB is binary and refused (see
//!   `common::is_binary`); other invalid UTF-8 shows as U+FFFD, and
//!   columns then count the bytes of the text as shown.
//! - A line is cut only when it is the first of the window: a long line later in the window
//!   ends the window before it, and the next call starts with it.
//! - A column inside a multi-byte character is an error that names the column to use.
//! - A file larger than [`DEFAULT_MAX_READ_BYTES_PER_FILE`] (the tools' `max_read_bytes`) is not read:
//!   [`ToolError::FileTooLarge`] names its size and the cap, checked before any memory is
//!   taken for it.

use crate::registry::ToolAnnotations;
use std::sync::Arc;

use serde_json::json;
use toolhost_sdk::schema::{integer, object, string};

use super::common::{checked_path, is_binary, storage_error};
use super::register_file_tool;
use super::{blocking, FileTools};
use crate::registry::{Arguments, RegisterError, Registry, ToolDefinition, ToolError, ToolResult};

const NAME: &str = "read_file";
/// The display title (MCP `title`), one of [`RESERVED_TOOL_TITLES`](crate::registry::RESERVED_TOOL_TITLES).
const TITLE: &str = "Read file";

/// Default cap of the files read_file and grep read: 64 MiB
/// ([`VfsToolOptions::max_read_bytes`](super::VfsToolOptions::max_read_bytes), the
/// command line's `--max-read-bytes`).
///
/// Every call reads the whole file into host memory (the storage has no ranged read), and
/// the model sees at most 40 KiB of it per call, so this bounds what one call can make
/// the host hold, not what the model can see. 64 MiB keeps a few concurrent reads of the
/// largest file far below a typical host's memory while leaving room for big logs and
/// data files; a 64 MiB file already takes some 1,600 calls to read through.
pub const DEFAULT_MAX_READ_BYTES_PER_FILE: u64 = 64 * 1024 * 1024;

/// Most lines one call shows (and the default `limit`).
pub const MAX_LINES: u64 = 2000;

/// Most bytes of `content` one call shows, measured as the JSON encoding of the string
/// without its two quotes (`"` and `\` count 2, `\n` and `\t` 2, other control characters
/// 6). 40 KiB leaves room for the other fields under the 64 KiB result cap.
pub const MAX_CONTENT_BYTES: usize = 40 * 1024;

const DESCRIPTION: &str = "Read a text file. Returns {content, content_type, size, offset, \
total_lines, truncated}: content holds the lines, each prefixed by its line number and a tab \
(\"1\\thello\\n2\\tworld\\n\"); the prefix is not part of the file, leave it out of edit strings. \
One call shows at most 2000 lines (limit, default and maximum 2000) and at most 40 KiB of \
content counted as JSON-encoded (quotes, backslashes and control characters count double or \
more). When truncated is true, call again with offset set to the number after the last line \
shown. A line too long for one call is cut and ends in \"[line N is cut here; read on with \
offset N and column C]\": call again with exactly that offset and column. An offset past the \
last line or a column past the end of its line is an error that says the valid range. Binary \
files (a NUL byte near the start) are refused.";

/// Registers `read_file`.
pub(super) fn register(registry: &Registry, tools: &Arc<FileTools>) -> Result<(), RegisterError> {
    let parameters = object(
        [
            ("path", string("Path of the file, relative to the store root, e.g. \"notes/todo.md\".")),
            ("offset", integer("First line to show, 1-based. Default 1.")),
            ("limit", integer("Most lines to show, 1 to 2000. Default 2000.")),
            (
                "column",
                integer("First byte to show in the offset line, 1-based; use the column a cut-line notice gives. Default 1."),
            ),
        ],
        ["path"],
    );
    register_file_tool(
        registry,
        tools,
        ToolDefinition::new(NAME, DESCRIPTION, parameters)
            .with_title(TITLE)
            .with_annotations(ToolAnnotations::read_only()),
        |tools, ctx, args| async move {
            let path = super::common::named_path(&ctx, &args);
            super::common::recorded(&ctx, path, false, run(tools, args)).await
        },
    )
}

async fn run(tools: Arc<FileTools>, args: Arguments) -> Result<ToolResult, ToolError> {
    let path = checked_path(&tools.policy, &args, "path")?;
    let offset = at_least_one(&args, "offset")?.unwrap_or(1);
    let limit = at_least_one(&args, "limit")?
        .unwrap_or(MAX_LINES)
        .min(MAX_LINES);
    let column = at_least_one(&args, "column")?.unwrap_or(1);
    blocking(move || {
        let file = tools
            .storage
            .read_capped(&path, tools.max_read_bytes)
            .map_err(|err| storage_error(NAME, err))?;
        if is_binary(&file.content) {
            return Err(ToolError::Failed {
                tool: NAME.to_owned(),
                message: format!(
                    "\"{path}\" is a binary file ({}, {} bytes: it holds NUL bytes), and read_file shows text only; read a text file instead",
                    file.content_type, file.size
                ),
            });
        }
        let text = String::from_utf8_lossy(&file.content);
        let window = Window::of(&text, &path, offset, limit, column)?;
        Ok(ToolResult::new(json!({
            "content": window.content,
            "content_type": file.content_type,
            "size": file.size,
            "offset": offset,
            "total_lines": window.total_lines,
            "truncated": window.truncated,
        })))
    })
    .await
}

/// An optional integer argument that must be 1 or more.
fn at_least_one(args: &Arguments, name: &str) -> Result<Option<u64>, ToolError> {
    match args.optional_u64(name)? {
        Some(0) => Err(args.invalid(format!(
            "argument \"{name}\" must be 1 or more (it is 1-based), got 0"
        ))),
        other => Ok(other),
    }
}

fn invalid(message: String) -> ToolError {
    ToolError::InvalidArguments {
        tool: NAME.to_owned(),
        message,
    }
}

/// The shown part of a file.
#[derive(Debug, PartialEq, Eq)]
struct Window {
    content: String,
    total_lines: u64,
    truncated: bool,
}

impl Window {
    /// The window of `text` starting at line `offset`, byte `column`, of at most `limit`
    /// lines and [`MAX_CONTENT_BYTES`] encoded bytes.
    fn of(text: &str, path: &str, offset: u64, limit: u64, column: u64) -> Result<Self, ToolError> {
        let (newlines, line_start) = scan_lines(text.as_bytes(), offset);
        let total_lines = newlines + u64::from(!text.is_empty() && !text.ends_with('\n'));
        if total_lines == 0 {
            if offset != 1 {
                return Err(invalid(format!(
                    "argument \"offset\" is {offset}, but \"{path}\" is empty (0 lines); read it with offset 1 or without an offset"
                )));
            }
            if column != 1 {
                return Err(invalid(format!(
                    "argument \"column\" is {column}, but \"{path}\" is empty; use column 1 or no column"
                )));
            }
            return Ok(Window {
                content: String::new(),
                total_lines,
                truncated: false,
            });
        }
        if offset > total_lines {
            let lines = if total_lines == 1 { "line" } else { "lines" };
            return Err(invalid(format!(
                "argument \"offset\" is {offset}, past the end of \"{path}\", which has {total_lines} {lines}; use an offset from 1 to {total_lines}"
            )));
        }
        // Offset `n` starts after the (n-1)-th newline, which exists since n <= total_lines.
        let line_start = line_start.unwrap_or(text.len());
        let first_line = line_at(text, line_start);
        let start = line_start + column_offset(first_line, path, offset, column)?;

        let mut content = String::new();
        let mut used = 0;
        let mut number = offset;
        let mut at = start;
        let mut truncated = false;
        while number <= total_lines {
            if number - offset == limit {
                truncated = true;
                break;
            }
            let line = line_at(text, at);
            let prefix = format!("{number}\t");
            // The prefix and the final "\n" each encode their tab or newline as 2 bytes.
            let frame = prefix.len() + 1 + 2;
            let room = MAX_CONTENT_BYTES - used;
            // The frame must fit too: an empty line "fits" any budget, its frame not.
            if frame <= room && fitting_len(line, room - frame) == line.len() {
                content.push_str(&prefix);
                content.push_str(line);
                content.push('\n');
                used += frame + encoded_len(line);
            } else if number != offset {
                truncated = true;
                break;
            } else {
                // First line of the window and too long: cut it, leaving room for the
                // notice (sized for the largest column this line can have). A smaller
                // budget than the one the whole line did not fit cuts it shorter still.
                let column_now = (at - line_start) as u64 + 1;
                let widest = notice(number, column_now + line.len() as u64).len();
                let cut = fitting_len(line, room - frame - widest);
                let next_column = column_now + cut as u64;
                content.push_str(&prefix);
                content.push_str(&line[..cut]);
                content.push_str(&notice(number, next_column));
                content.push('\n');
                truncated = true;
                break;
            }
            at += line.len() + 1;
            number += 1;
        }
        Ok(Window {
            content,
            total_lines,
            truncated,
        })
    }
}

/// Counts the newlines in `text` and finds where line `offset` (1-based) starts, if it
/// does, in one pass over 8-byte words (a whole 16 MiB file per call stays cheap, also in
/// unoptimised builds).
fn scan_lines(text: &[u8], offset: u64) -> (u64, Option<usize>) {
    let skip = offset.saturating_sub(1);
    let mut newlines = 0u64;
    let mut start = (skip == 0).then_some(0);
    let (words, tail) = text.as_chunks::<8>();
    for (index, word) in words.iter().enumerate() {
        let found = u64::from(newline_mask(u64::from_ne_bytes(*word)).count_ones());
        if start.is_none() && newlines + found >= skip {
            start = Some(index * 8 + nth_newline(word, skip - newlines) + 1);
        }
        newlines += found;
    }
    let base = words.len() * 8;
    for (at, _) in tail.iter().enumerate().filter(|(_, &b)| b == b'\n') {
        newlines += 1;
        if start.is_none() && newlines == skip {
            start = Some(base + at + 1);
        }
    }
    (newlines, start)
}

/// The high bit of each byte of `word` that is `\n`, and nothing else.
fn newline_mask(word: u64) -> u64 {
    const LOW: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    let x = word ^ 0x0a0a_0a0a_0a0a_0a0a; // newline bytes become zero
                                          // (x & LOW) + LOW sets a byte's high bit when its low bits are not all zero; with x's
                                          // own high bit that marks every non-zero byte, exactly, as no carry crosses bytes.
    !(((x & LOW) + LOW) | x | LOW)
}

/// The index of the `n`-th (1-based) newline in `bytes`, which has at least `n`.
fn nth_newline(bytes: &[u8], n: u64) -> usize {
    bytes
        .iter()
        .enumerate()
        .filter(|(_, &b)| b == b'\n')
        .nth((n - 1) as usize)
        .map_or(bytes.len(), |(at, _)| at)
}

/// The line starting at byte `start`, without its `\n`.
fn line_at(text: &str, start: usize) -> &str {
    let rest = text.get(start..).unwrap_or("");
    rest.find('\n').map_or(rest, |end| &rest[..end])
}

/// The byte offset in `line` that 1-based `column` names, checked.
fn column_offset(line: &str, path: &str, offset: u64, column: u64) -> Result<usize, ToolError> {
    let last = (line.len() as u64).max(1);
    if column > last {
        return Err(invalid(if line.is_empty() {
            format!(
                "argument \"column\" is {column}, past the end of line {offset} of \"{path}\", which is empty; use column 1 or no column"
            )
        } else {
            format!(
                "argument \"column\" is {column}, past the end of line {offset} of \"{path}\", which is {} bytes long; use a column from 1 to {}",
                line.len(),
                line.len()
            )
        }));
    }
    let at = (column - 1) as usize;
    if !line.is_char_boundary(at) {
        let before = line.floor_char_boundary(at);
        return Err(invalid(format!(
            "argument \"column\" is {column}, inside a multi-byte character of line {offset}; use column {} (where that character starts)",
            before + 1
        )));
    }
    Ok(at)
}

/// `[line N is cut here; read on with offset N and column C]`.
fn notice(line: u64, column: u64) -> String {
    format!("[line {line} is cut here; read on with offset {line} and column {column}]")
}

/// How many bytes of `line` (up to a character boundary) fit in `budget` bytes of JSON
/// encoding: `line.len()` when all of it does. Scans only as far as the budget reaches.
fn fitting_len(line: &str, budget: usize) -> usize {
    let mut used = 0;
    for (at, c) in line.char_indices() {
        let cost = if c.is_ascii() {
            byte_cost(c as u8)
        } else {
            c.len_utf8()
        };
        if used + cost > budget {
            return at;
        }
        used += cost;
    }
    line.len()
}

/// Length of `s` JSON-encoded, without the quotes.
fn encoded_len(s: &str) -> usize {
    s.bytes().map(byte_cost).sum()
}

/// Bytes one UTF-8 byte takes in a JSON string as serde_json writes it: `"` and `\` and
/// the short escapes (`\b \t \n \f \r`) 2, other control characters 6 (`\u0001`), all
/// else (including each byte of a multi-byte character) 1.
fn byte_cost(b: u8) -> usize {
    match b {
        b'"' | b'\\' | 0x08 | b'\t' | b'\n' | 0x0c | b'\r' => 2,
        0x00..=0x1f => 6,
        _ => 1,
    }
}

#[cfg(test)]
mod tests;
