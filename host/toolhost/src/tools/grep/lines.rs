//! Line-oriented matching over a whole file buffer, for `grep`.
//!
//! The regex runs over the whole buffer (one search finds the next match however many
//! lines lie before it, with the `regex` crate's literal prefilters doing the skipping);
//! each match is then mapped to its line with `memchr`. Lines are what `grep` reports, so
//! a match that runs over a line break counts only if the regex also matches within the
//! line alone; after the first such match the rest of that file is searched line by line,
//! which keeps a pattern like `a[^z]*b` linear instead of rescanning the tail of the file
//! from every line.
//!
//! A line ends at `\n`; a `\r` before it belongs to the line end (the regex is built in
//! CRLF mode, so `$` matches before `\r\n`), and reported text leaves it out. A file ending
//! in `\n` has no empty last line.

use std::borrow::Cow;

use memchr::{memchr, memchr_iter, memrchr};
use regex::bytes::Regex;

/// Reported lines are cut to this many characters.
pub(super) const MAX_LINE_CHARS: usize = 500;

/// The matching lines of `buf`, in order, as `(start, end)` byte ranges without the `\n`.
pub(super) struct MatchingLines<'r, 'b> {
    regex: &'r Regex,
    buf: &'b [u8],
    /// Where the search goes on: always the start of a line (or past the end).
    from: usize,
    /// A match ran over a line break: go on one line at a time.
    line_by_line: bool,
}

impl<'r, 'b> MatchingLines<'r, 'b> {
    pub(super) fn new(regex: &'r Regex, buf: &'b [u8]) -> Self {
        Self {
            regex,
            buf,
            from: 0,
            line_by_line: false,
        }
    }

    /// Whether the regex matches within the line `start..end` alone.
    fn line_matches(&self, start: usize, end: usize) -> bool {
        // Searching `buf[..end]` from `start` keeps the byte before the line in view for
        // `\b` and `^`, and makes the line end the end of the haystack for `$`.
        self.regex.find_at(&self.buf[..end], start).is_some()
    }
}

impl Iterator for MatchingLines<'_, '_> {
    type Item = (usize, usize);

    fn next(&mut self) -> Option<(usize, usize)> {
        let buf = self.buf;
        while self.from < buf.len() {
            if self.line_by_line {
                let start = self.from;
                let end = line_end(buf, start);
                self.from = end + 1;
                if self.line_matches(start, end) {
                    return Some((start, end));
                }
                continue;
            }
            let Some(found) = self.regex.find_at(buf, self.from) else {
                self.from = buf.len() + 1;
                return None;
            };
            let at = found.start();
            if at == buf.len() && buf.last() == Some(&b'\n') {
                // An empty match after the final line break: there is no line there.
                self.from = buf.len() + 1;
                return None;
            }
            let start =
                memrchr(b'\n', &buf[self.from..at]).map_or(self.from, |i| self.from + i + 1);
            let end = line_end(buf, at);
            self.from = end + 1;
            if found.end() <= end {
                return Some((start, end));
            }
            self.line_by_line = true;
            if self.line_matches(start, end) {
                return Some((start, end));
            }
        }
        None
    }
}

/// Where the line holding `at` ends: the index of its `\n`, or the buffer's end.
pub(super) fn line_end(buf: &[u8], at: usize) -> usize {
    memchr(b'\n', &buf[at..]).map_or(buf.len(), |i| at + i)
}

/// The start of the line before the one starting at `start` (`start > 0`).
fn previous_line_start(buf: &[u8], start: usize) -> usize {
    memrchr(b'\n', &buf[..start - 1]).map_or(0, |i| i + 1)
}

/// 1-based line numbers of line starts, asked for in increasing order.
struct LineCounter {
    at: usize,
    line: u64,
}

impl LineCounter {
    fn new() -> Self {
        Self { at: 0, line: 1 }
    }

    fn line_of(&mut self, buf: &[u8], start: usize) -> u64 {
        self.line += memchr_iter(b'\n', &buf[self.at..start]).count() as u64;
        self.at = start;
        self.line
    }
}

/// The content-mode entries of one file: `path:line:text` for matching lines and
/// `path-line-text` for up to `context` lines around them (each line once, in order),
/// stopping once `cap` entries are made.
pub(super) fn content_entries(
    regex: &Regex,
    path: &str,
    buf: &[u8],
    context: usize,
    cap: usize,
) -> Vec<String> {
    let mut out = Vec::new();
    let mut counter = LineCounter::new();
    let mut emit = |out: &mut Vec<String>, separator: char, start: usize| -> usize {
        let end = line_end(buf, start);
        let line = counter.line_of(buf, start);
        let text = line_text(&buf[start..end]);
        out.push(format!("{path}{separator}{line}{separator}{text}"));
        end + 1
    };
    // Everything before this (a line start) has been reported.
    let mut reported = 0;
    // Context lines still owed after the last match.
    let mut owed = 0;
    for (start, end) in MatchingLines::new(regex, buf) {
        while owed > 0 && reported < start && out.len() < cap {
            reported = emit(&mut out, '-', reported);
            owed -= 1;
        }
        let mut first = start;
        for _ in 0..context {
            if first <= reported {
                break;
            }
            first = previous_line_start(buf, first);
        }
        while first < start && out.len() < cap {
            first = emit(&mut out, '-', first);
        }
        if out.len() >= cap {
            return out;
        }
        emit(&mut out, ':', start);
        reported = end + 1;
        owed = context;
    }
    while owed > 0 && reported < buf.len() && out.len() < cap {
        reported = emit(&mut out, '-', reported);
        owed -= 1;
    }
    out
}

/// A line as reported: without a trailing `\r`, invalid UTF-8 replaced, cut to
/// [`MAX_LINE_CHARS`] characters.
pub(super) fn line_text(line: &[u8]) -> Cow<'_, str> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    // 4 bytes per character at most: this prefix holds the first MAX_LINE_CHARS
    // characters whole, whatever the line, so long lines are never decoded in full.
    let prefix = &line[..line.len().min(MAX_LINE_CHARS * 4)];
    match String::from_utf8_lossy(prefix) {
        Cow::Borrowed(text) => Cow::Borrowed(cut(text)),
        Cow::Owned(text) => Cow::Owned(cut(&text).to_owned()),
    }
}

/// `text` cut to [`MAX_LINE_CHARS`] characters.
fn cut(text: &str) -> &str {
    match text.char_indices().nth(MAX_LINE_CHARS) {
        Some((end, _)) => &text[..end],
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use regex::bytes::RegexBuilder;

    use super::*;

    fn regex(pattern: &str) -> Regex {
        RegexBuilder::new(pattern)
            .multi_line(true)
            .crlf(true)
            .build()
            .unwrap()
    }

    fn lines<'b>(pattern: &str, buf: &'b str) -> Vec<&'b str> {
        let regex = regex(pattern);
        MatchingLines::new(&regex, buf.as_bytes())
            .map(|(start, end)| &buf[start..end])
            .collect()
    }

    #[test]
    fn each_line_once_in_order() {
        assert_eq!(lines("o", "foo\nbar\nboo"), ["foo", "boo"]);
        assert_eq!(lines("x", "foo\nbar\n"), Vec::<&str>::new());
        assert_eq!(lines("", ""), Vec::<&str>::new());
    }

    #[test]
    fn empty_matches_and_the_last_line() {
        assert_eq!(lines("^", "a\n\nb\n"), ["a", "", "b"]);
        assert_eq!(lines("$", "a\nb"), ["a", "b"]);
        assert_eq!(lines("^$", "a\n\nb\n"), [""]);
    }

    #[test]
    fn dollar_at_crlf_line_ends() {
        assert_eq!(lines("b$", "ab\r\ncb\r\nbc\r\n"), ["ab\r", "cb\r"]);
        assert_eq!(lines("^a.*$", "abc\r\nxa\r\n"), ["abc\r"]);
    }

    #[test]
    fn matches_over_line_breaks_count_only_within_a_line() {
        assert_eq!(lines(r"a\s+b", "a\nb\na b\n"), ["a b"]);
        assert_eq!(lines(r"a[^z]*b", "a\nxx\nb\nab\n"), ["ab"]);
        assert_eq!(lines(r"o\s*", "foo\nbar\nzoo\n"), ["foo", "zoo"]);
        assert_eq!(lines(r"\n", "a\nb\n"), Vec::<&str>::new());
    }

    #[test]
    fn context_lines_merge_and_number() {
        let regex = regex("m");
        let buf = b"1\n2\nm3\n4\n5\n6\nm7\nm8\n9\n";
        assert_eq!(
            content_entries(&regex, "f", buf, 1, 100),
            ["f-2-2", "f:3:m3", "f-4-4", "f-6-6", "f:7:m7", "f:8:m8", "f-9-9"]
        );
        assert_eq!(
            content_entries(&regex, "f", buf, 2, 100),
            ["f-1-1", "f-2-2", "f:3:m3", "f-4-4", "f-5-5", "f-6-6", "f:7:m7", "f:8:m8", "f-9-9"]
        );
        assert_eq!(
            content_entries(&regex, "f", buf, 0, 2),
            ["f:3:m3", "f:7:m7"]
        );
        assert_eq!(
            content_entries(&regex, "f", buf, 1, 3),
            ["f-2-2", "f:3:m3", "f-4-4"]
        );
        assert_eq!(
            content_entries(&regex, "f", b"m\nx", 5, 100),
            ["f:1:m", "f-2-x"]
        );
    }

    #[test]
    fn long_lines_are_cut_at_a_character() {
        let line = "é".repeat(600);
        assert_eq!(line_text(line.as_bytes()), "é".repeat(500));
        assert_eq!(line_text(b"ab\r"), "ab");
        assert_eq!(line_text(b"a\xffb"), "a\u{fffd}b");
        let wide = "😀".repeat(501);
        assert_eq!(line_text(wide.as_bytes()), "😀".repeat(500));
    }
}
