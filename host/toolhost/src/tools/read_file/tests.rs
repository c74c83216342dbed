//! read_file cases, each run on the memory and osfs backends.

use serde_json::{json, Value};

use super::*;
use crate::tools::testutil::{backend_tests, failed, invalid_arguments, Backend, Harness};

/// The `content` of a read_file result.
fn content(result: &Value) -> &str {
    result["content"].as_str().expect("content is a string")
}

/// Length of `s` as a JSON string, without the quotes, as serde_json writes it.
fn json_len(s: &str) -> usize {
    serde_json::to_string(s).expect("encode").len() - 2
}

async fn read(h: &Harness, args: Value) -> Value {
    h.call(NAME, args).await.expect("read_file succeeds")
}

/// `count` lines `line 1` ... `line {count}`, each ending in a newline.
fn numbered(count: usize) -> String {
    (1..=count).map(|i| format!("line {i}\n")).collect()
}

/// The read_file content showing lines `from..=to` of [`numbered`].
fn shown(from: usize, to: usize) -> String {
    (from..=to).map(|i| format!("{i}\tline {i}\n")).collect()
}

async fn numbered_lines_and_every_field(backend: Backend) {
    let h = backend.default_harness();
    h.put("a.md", "hello\nworld\n");
    assert_eq!(
        read(&h, json!({"path": "a.md"})).await,
        json!({
            "content": "1\thello\n2\tworld\n",
            "content_type": "text/markdown",
            "size": 12,
            "offset": 1,
            "total_lines": 2,
            "truncated": false,
        })
    );
    // No final newline: the last line still counts and is shown ending in "\n".
    h.put("b.txt", "hello\r\nworld");
    let result = read(&h, json!({"path": "b.txt"})).await;
    assert_eq!(content(&result), "1\thello\r\n2\tworld\n");
    assert_eq!(result["total_lines"], 2);
    assert_eq!(result["content_type"], "text/plain");
    assert_eq!(result["size"], 12);
}

async fn exactly_2000_lines_is_not_truncated(backend: Backend) {
    let h = backend.default_harness();
    h.put("a.md", numbered(2000));
    let result = read(&h, json!({"path": "a.md"})).await;
    assert_eq!(content(&result), shown(1, 2000));
    assert_eq!(result["total_lines"], 2000);
    assert_eq!(result["truncated"], false);
}

async fn line_2001_needs_a_second_call(backend: Backend) {
    let h = backend.default_harness();
    h.put("a.md", numbered(2001));
    let first = read(&h, json!({"path": "a.md"})).await;
    assert_eq!(content(&first), shown(1, 2000));
    assert_eq!(first["truncated"], true);
    assert_eq!(first["total_lines"], 2001);
    let second = read(&h, json!({"path": "a.md", "offset": 2001})).await;
    assert_eq!(content(&second), "2001\tline 2001\n");
    assert_eq!(second["offset"], 2001);
    assert_eq!(second["truncated"], false);
}

async fn limit_is_a_line_count_capped_at_2000(backend: Backend) {
    let h = backend.default_harness();
    h.put("a.md", numbered(5));
    let result = read(&h, json!({"path": "a.md", "limit": 2})).await;
    assert_eq!(content(&result), shown(1, 2));
    assert_eq!(result["truncated"], true);
    let result = read(&h, json!({"path": "a.md", "offset": 4, "limit": 2})).await;
    assert_eq!(content(&result), shown(4, 5));
    assert_eq!(result["truncated"], false);
    h.put("big.md", numbered(2001));
    let result = read(&h, json!({"path": "big.md", "limit": 5000})).await;
    assert_eq!(content(&result), shown(1, 2000));
    assert_eq!(result["truncated"], true);
}

/// Nine lines of 4000 `x` and a tenth of `last` `x`. Lines 1-9 encode to 4005 bytes each
/// (`N\t` is 3, the text 4000, `\n` 2), 36045 in all; line 10 to 4 + `last` + 2. So with
/// `last` 4909 the content encodes to exactly 40960 bytes.
fn forty_kib(last: usize) -> String {
    let mut text = ("x".repeat(4000) + "\n").repeat(9);
    text.push_str(&"x".repeat(last));
    text.push('\n');
    text
}

async fn exactly_40_kib_encoded_fits(backend: Backend) {
    let h = backend.default_harness();
    h.put("a.md", forty_kib(4909));
    let result = read(&h, json!({"path": "a.md"})).await;
    assert_eq!(json_len(content(&result)), MAX_CONTENT_BYTES);
    assert_eq!(result["truncated"], false);
    assert!(content(&result).ends_with(&format!("10\t{}\n", "x".repeat(4909))));
}

async fn one_byte_over_40_kib_ends_the_window(backend: Backend) {
    let h = backend.default_harness();
    h.put("a.md", forty_kib(4910));
    let result = read(&h, json!({"path": "a.md"})).await;
    assert_eq!(result["truncated"], true);
    let lines: Vec<&str> = content(&result).lines().collect();
    assert_eq!(lines.len(), 9);
    assert!(lines[8].starts_with("9\t"));
    // The model continues at the next line number and gets the whole line.
    let next = read(&h, json!({"path": "a.md", "offset": 10})).await;
    assert_eq!(content(&next), format!("10\t{}\n", "x".repeat(4910)));
    assert_eq!(next["truncated"], false);
}

/// One unit encodes to 14 bytes: `\"` 2, `\\` 2, `\u0001` 6, `\t` 2, `é` 2.
const ESCAPES: &str = "\"\\\u{1}\té";

/// Nine lines of 300 units (4205 encoded bytes each with their frame) and a tenth line of
/// 222 units plus `tail`; with tail "x" the content encodes to exactly 40960 bytes.
fn escape_heavy(tail: &str) -> String {
    let mut text = (ESCAPES.repeat(300) + "\n").repeat(9);
    text.push_str(&ESCAPES.repeat(222));
    text.push_str(tail);
    text.push('\n');
    text
}

async fn escapes_count_by_their_encoding(backend: Backend) {
    let h = backend.default_harness();
    let text = escape_heavy("x");
    h.put("a.md", &text);
    let result = read(&h, json!({"path": "a.md"})).await;
    assert_eq!(json_len(content(&result)), MAX_CONTENT_BYTES);
    assert!(content(&result).len() < 30_000, "raw bytes are far fewer");
    assert_eq!(result["truncated"], false);
    assert_eq!(result["total_lines"], 10);

    h.put("b.md", escape_heavy("xy"));
    let result = read(&h, json!({"path": "b.md"})).await;
    assert_eq!(result["truncated"], true);
    assert_eq!(content(&result).lines().count(), 9);
    assert!(json_len(content(&result)) <= MAX_CONTENT_BYTES);
}

/// A window nearly full, then empty lines: an empty line fits no budget smaller than its
/// frame (`N\t` and the newline), and must end the window there, not overrun it.
async fn empty_lines_past_a_nearly_full_window_end_it(backend: Backend) {
    let h = backend.default_harness();
    // Line 1 costs 5 (its frame) + its length: 2 bytes short of the budget, less than
    // the 5 bytes line 2's frame needs.
    let first = "x".repeat(MAX_CONTENT_BYTES - 7);
    h.put("a.md", format!("{first}\n\n\n\nlast\n"));
    let result = read(&h, json!({"path": "a.md"})).await;
    assert_eq!(result["truncated"], true, "{result}");
    assert_eq!(content(&result), format!("1\t{first}\n"));
    assert!(json_len(content(&result)) <= MAX_CONTENT_BYTES);
    let next = read(&h, json!({"path": "a.md", "offset": 2})).await;
    assert_eq!(content(&next), "2\t\n3\t\n4\t\n5\tlast\n");
    assert_eq!(next["truncated"], false);
}

async fn a_100_kib_line_is_read_across_three_calls(backend: Backend) {
    let h = backend.default_harness();
    let long: String = (0..102_400u32)
        .map(|i| char::from(b'a' + (i % 26) as u8))
        .collect();
    h.put("a.md", format!("first\n{long}\nlast\n"));

    let one = read(&h, json!({"path": "a.md", "offset": 2})).await;
    let notice = "[line 2 is cut here; read on with offset 2 and column 40895]\n";
    assert_eq!(content(&one), format!("2\t{}{notice}", &long[..40_894]));
    assert_eq!(one["truncated"], true);
    assert!(json_len(content(&one)) <= MAX_CONTENT_BYTES);

    let two = read(&h, json!({"path": "a.md", "offset": 2, "column": 40_895})).await;
    let notice = "[line 2 is cut here; read on with offset 2 and column 81789]\n";
    assert_eq!(
        content(&two),
        format!("2\t{}{notice}", &long[40_894..81_788])
    );
    assert_eq!(two["truncated"], true);
    assert!(json_len(content(&two)) <= MAX_CONTENT_BYTES);

    let three = read(&h, json!({"path": "a.md", "offset": 2, "column": 81_789})).await;
    assert_eq!(
        content(&three),
        format!("2\t{}\n3\tlast\n", &long[81_788..])
    );
    assert_eq!(three["truncated"], false);

    let pieces = [&one, &two, &three].map(|r| {
        let text = content(r).strip_prefix("2\t").expect("starts at line 2");
        let end = text
            .find("[line 2")
            .or_else(|| text.find('\n'))
            .expect("end");
        text[..end].to_owned()
    });
    assert_eq!(pieces.concat(), long);
}

async fn a_cut_falls_on_a_character_boundary(backend: Backend) {
    let h = backend.default_harness();
    let line = "é".repeat(30_000);
    h.put("a.md", format!("{line}\n"));
    let one = read(&h, json!({"path": "a.md"})).await;
    // Budget 40960 - 5 (frame) - 60 (notice) = 40895 bytes: 20447 characters fit.
    assert_eq!(
        content(&one),
        format!(
            "1\t{}[line 1 is cut here; read on with offset 1 and column 40895]\n",
            "é".repeat(20_447)
        )
    );
    let err = h
        .call(NAME, json!({"path": "a.md", "column": 40_896}))
        .await;
    assert_eq!(
        invalid_arguments(err),
        "argument \"column\" is 40896, inside a multi-byte character of line 1; use column 40895 (where that character starts)"
    );
    let two = read(&h, json!({"path": "a.md", "column": 40_895})).await;
    assert_eq!(content(&two), format!("1\t{}\n", "é".repeat(9_553)));
    assert_eq!(two["truncated"], false);
}

async fn offset_past_the_end_is_an_error(backend: Backend) {
    let h = backend.default_harness();
    h.put("a.md", "a\nb\nc\n");
    let err = h.call(NAME, json!({"path": "a.md", "offset": 4})).await;
    assert_eq!(
        err.unwrap_err().to_string(),
        "read_file: argument \"offset\" is 4, past the end of \"a.md\", which has 3 lines; use an offset from 1 to 3"
    );
    h.put("one.md", "only");
    assert_eq!(
        invalid_arguments(h.call(NAME, json!({"path": "one.md", "offset": 2})).await),
        "argument \"offset\" is 2, past the end of \"one.md\", which has 1 line; use an offset from 1 to 1"
    );
    let last = read(&h, json!({"path": "a.md", "offset": 3})).await;
    assert_eq!(content(&last), "3\tc\n");
    for (args, message) in [
        (
            json!({"path": "a.md", "offset": 0}),
            "argument \"offset\" must be 1 or more (it is 1-based), got 0",
        ),
        (
            json!({"path": "a.md", "limit": 0}),
            "argument \"limit\" must be 1 or more (it is 1-based), got 0",
        ),
        (
            json!({"path": "a.md", "offset": "2"}),
            "argument \"offset\" must be an integer, got string",
        ),
        (
            json!({"path": "a.md", "column": -1}),
            "argument \"column\" must be 0 or more, got -1",
        ),
    ] {
        assert_eq!(invalid_arguments(h.call(NAME, args).await), message);
    }
}

async fn an_empty_file_has_zero_lines(backend: Backend) {
    let h = backend.default_harness();
    h.put("empty.md", "");
    assert_eq!(
        read(&h, json!({"path": "empty.md"})).await,
        json!({
            "content": "",
            "content_type": "text/markdown",
            "size": 0,
            "offset": 1,
            "total_lines": 0,
            "truncated": false,
        })
    );
    let err = h.call(NAME, json!({"path": "empty.md", "offset": 2})).await;
    assert_eq!(
        invalid_arguments(err),
        "argument \"offset\" is 2, but \"empty.md\" is empty (0 lines); read it with offset 1 or without an offset"
    );
}

async fn column_past_the_end_of_its_line_is_an_error(backend: Backend) {
    let h = backend.default_harness();
    h.put("a.md", "hello\n\nworld");
    let err = h.call(NAME, json!({"path": "a.md", "column": 6})).await;
    assert_eq!(
        invalid_arguments(err),
        "argument \"column\" is 6, past the end of line 1 of \"a.md\", which is 5 bytes long; use a column from 1 to 5"
    );
    let result = read(&h, json!({"path": "a.md", "column": 5})).await;
    assert_eq!(content(&result), "1\to\n2\t\n3\tworld\n");
    let err = h
        .call(NAME, json!({"path": "a.md", "offset": 2, "column": 2}))
        .await;
    assert_eq!(
        invalid_arguments(err),
        "argument \"column\" is 2, past the end of line 2 of \"a.md\", which is empty; use column 1 or no column"
    );
    let result = read(&h, json!({"path": "a.md", "offset": 2, "column": 1})).await;
    assert_eq!(content(&result), "2\t\n3\tworld\n");
}

async fn binary_files_are_refused_and_bad_utf8_is_replaced(backend: Backend) {
    let h = backend.default_harness();
    h.put("logo.png", b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR");
    assert_eq!(
        failed(h.call(NAME, json!({"path": "logo.png"})).await),
        "\"logo.png\" is a binary file (image/png, 16 bytes: it holds NUL bytes), and read_file shows text only; read a text file instead"
    );
    h.put("latin1.txt", b"caf\xe9\n");
    let result = read(&h, json!({"path": "latin1.txt"})).await;
    assert_eq!(content(&result), "1\tcaf\u{fffd}\n");
    assert_eq!(result["size"], 5);
}

async fn missing_and_invalid_paths(backend: Backend) {
    let h = backend.default_harness();
    assert_eq!(
        failed(h.call(NAME, json!({"path": "nope.md"})).await),
        "no file at \"nope.md\"; call list_files to see what exists"
    );
    let message = invalid_arguments(h.call(NAME, json!({"path": "../x.md"})).await);
    assert!(
        message.starts_with("argument \"path\" contains a \"..\" segment"),
        "{message}"
    );
    assert_eq!(
        invalid_arguments(h.call(NAME, json!({})).await),
        "argument \"path\" is required"
    );
}

async fn hidden_paths_and_extensions_are_refused(backend: Backend) {
    let h = backend.harness(|options| {
        options.hide_hidden_paths = true;
        options.allowed_extensions = Some(vec![".md".into()]);
    });
    h.put(".env", "SECRET=1\n");
    h.put("a.rs", "fn main() {}\n");
    h.put("b.MD", "ok\n");
    assert_eq!(
        invalid_arguments(h.call(NAME, json!({"path": ".env"})).await),
        "argument \"path\" is \".env\", a hidden path (a segment starts with _ or .); hidden paths are not available here, use another path"
    );
    assert_eq!(
        invalid_arguments(h.call(NAME, json!({"path": "a.rs"})).await),
        "argument \"path\" is \"a.rs\", whose extension is not allowed here; use a path ending in one of: .md"
    );
    assert_eq!(content(&read(&h, json!({"path": "b.MD"})).await), "1\tok\n");
}

backend_tests!(
    numbered_lines_and_every_field,
    exactly_2000_lines_is_not_truncated,
    line_2001_needs_a_second_call,
    limit_is_a_line_count_capped_at_2000,
    exactly_40_kib_encoded_fits,
    one_byte_over_40_kib_ends_the_window,
    empty_lines_past_a_nearly_full_window_end_it,
    escapes_count_by_their_encoding,
    a_100_kib_line_is_read_across_three_calls,
    a_cut_falls_on_a_character_boundary,
    offset_past_the_end_is_an_error,
    an_empty_file_has_zero_lines,
    column_past_the_end_of_its_line_is_an_error,
    binary_files_are_refused_and_bad_utf8_is_replaced,
    missing_and_invalid_paths,
    hidden_paths_and_extensions_are_refused,
);

#[test]
fn byte_cost_matches_serde_json() {
    for b in 0u8..0x80 {
        let encoded = serde_json::to_string(&char::from(b).to_string()).expect("encode");
        assert_eq!(byte_cost(b), encoded.len() - 2, "byte {b:#04x}");
    }
    let sample = "naïve \"quote\" \\ tab\t nul\0 bell\u{7} del\u{7f} 日本";
    assert_eq!(encoded_len(sample), json_len(sample));
}

#[test]
fn window_at_the_end_of_16_mib() {
    // 16 MiB of 64-byte lines: the last line's window, found by counting newlines.
    let line = format!("{}\n", "y".repeat(63));
    let text = line.repeat(16 * 1024 * 1024 / 64);
    let total = (text.len() / 64) as u64;
    let window = Window::of(&text, "big.md", total, 2000, 1).expect("window");
    assert_eq!(window.total_lines, total);
    assert_eq!(window.content, format!("{total}\t{line}"));
    assert!(!window.truncated);
}

#[test]
fn scan_lines_counts_and_locates_across_words() {
    // Newline patterns around the 8-byte word edges, against a plain byte scan.
    let texts = [
        String::new(),
        "\n".repeat(17),
        "abcdefg\nabcdefg\n\n".to_owned(),
        "a\nbcdefghijklmnop\nqrstuvwxyz\n1234567\n8".to_owned(),
        "é\n日本語\n\n\nxyz".repeat(5),
    ];
    for text in &texts {
        let bytes = text.as_bytes();
        let starts: Vec<usize> = std::iter::once(0)
            .chain(
                bytes
                    .iter()
                    .enumerate()
                    .filter(|(_, &b)| b == b'\n')
                    .map(|(i, _)| i + 1),
            )
            .collect();
        let newlines = (starts.len() - 1) as u64;
        for offset in 1..=starts.len() as u64 + 1 {
            let want = starts.get((offset - 1) as usize).copied();
            assert_eq!(
                scan_lines(bytes, offset),
                (newlines, want),
                "{text:?} offset {offset}"
            );
        }
    }
}
