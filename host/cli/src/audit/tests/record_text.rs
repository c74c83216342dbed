//! The record's hand-written text: its times and its escaping, byte for byte what
//! serde_json and `format_utc_time` write.

use super::super::writer::time_text;
use super::*;

#[test]
fn record_times_are_written_as_format_utc_time_writes_them() {
    let mut second = None;
    for millis in [
        0u64,
        951_782_400_123,
        951_782_400_999,
        951_782_401_007,
        1_764_877_826_045,
    ] {
        let at = std::time::UNIX_EPOCH + Duration::from_millis(millis);
        let mut out = Vec::new();
        time_text(&mut second, at, &mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            toolhost::registry::format_utc_time(at)
        );
    }
}

/// The record's hand-written line is, byte for byte, what serde_json writes for it: with
/// every optional field absent and present, and text in every field that carries outside
/// text (quotes, backslashes, newlines and every other control character, U+2028, other
/// non-ASCII) escaped the same way.
#[test]
fn hand_written_record_is_serde_json_byte_for_byte() {
    use super::super::writer::Line as _;
    let mut hostile: String = (0u8..0x20).map(char::from).collect();
    hostile.push_str("\"\\/\u{7f}\u{2028}\u{2029}é\u{1f600}\n{\"event\":\"forged\"}");
    let texts = [
        "",
        "plain-ascii_0.9 with spaces/and:colons",
        "9f0c2d1e-5b7a-4c3d-8e2f-0a1b2c3d4e5f",
        "quote\"inside",
        "back\\slash",
        "new\nline",
        "sep\u{2028}arator",
        hostile.as_str(),
    ];
    let plugin = serde_json::value::to_raw_value(&PluginRef {
        file: "/plugins/g\"reet\n.wasm".to_owned(),
        sha256: format!("sha256:{}", "ab".repeat(32)),
    })
    .unwrap();
    let mut digest = [0u8; 71];
    let sha = sha256_text(&Sha256::digest(b"{}"), &mut digest).to_owned();
    let mut checked = 0;
    for (i, text) in texts.iter().enumerate() {
        let list: Vec<String> = texts[..=i].iter().map(|t| (*t).to_owned()).collect();
        for full in [false, true] {
            for duration_ms in [0.0, 0.001_5, 1.0, 12.345_678_9, 1e21, f64::NAN] {
                let record = Record {
                    event: "call",
                    session: text,
                    principal: full.then_some(*text),
                    turn: text,
                    request: text,
                    tool: text,
                    nested_in: full.then_some(*text),
                    plugin: full.then_some(plugin.as_ref()),
                    arguments_sha256: &sha,
                    arguments_bytes: if full { usize::MAX } else { 0 },
                    arguments: full.then_some(*text),
                    outcome: if full { "tool_error" } else { "ok" },
                    ran: full,
                    error_kind: full.then_some("limit_exceeded"),
                    limit: full.then(|| (*text).to_owned()),
                    duration_ms,
                    bytes_out: if full { 1_234_567 } else { 0 },
                    files_read: if full { &list } else { &[] },
                    files_written: if full { &list[..1] } else { &[] },
                    files_truncated: if full { u32::MAX } else { 0 },
                    hosts: if full { &list } else { &[] },
                    hosts_truncated: if full { 7 } else { 0 },
                };
                let mut line = Vec::new();
                record.write_line(&mut line);
                let expected = serde_json::to_vec(&record).unwrap();
                assert_eq!(
                    String::from_utf8(line).unwrap(),
                    String::from_utf8(expected).unwrap(),
                    "text {text:?}, full {full}, duration {duration_ms}"
                );
                checked += 1;
            }
        }
    }
    assert_eq!(checked, texts.len() * 2 * 6);
}

/// The eight-at-a-time check finds each byte serde_json escapes at every position of
/// a word and of the tail, and passes every other byte (0x7f and above included).
#[test]
fn needs_escape_is_exact_for_every_byte_at_every_position() {
    for len in 1..=17 {
        for at in 0..len {
            for byte in 0..=255u8 {
                let mut bytes = vec![b'a'; len];
                bytes[at] = byte;
                let expected = byte < 0x20 || byte == b'"' || byte == b'\\';
                assert_eq!(
                    super::needs_escape(&bytes),
                    expected,
                    "byte {byte:#x} at {at} of {len}"
                );
            }
        }
    }
    assert!(!super::needs_escape(b""));
    assert!(!super::needs_escape("\u{2028}é\u{7f}\u{80}".as_bytes()));
}
