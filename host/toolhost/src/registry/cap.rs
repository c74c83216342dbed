//! Holding error text to the result cap: every [`ToolError`] leaves
//! [`Registry::dispatch`](super::Registry::dispatch) through [`cap_error`], so no handler,
//! plugin or argument echo can send the model more text as an error than it could as a
//! result.
//!
//! Text is measured as it is sent: JSON-encoded, escapes counted (a control character
//! takes 6 bytes as `\u0001`), the same way the result cap measures a result. A cut keeps
//! whole characters and ends in a note saying how many bytes of the original were left
//! out: `... (15728600 more bytes cut)`.

use std::cmp::Reverse;

use super::ToolError;

/// The note that ends a cut text: how many bytes of the original it leaves out.
pub(crate) fn cut_note(cut_bytes: usize) -> String {
    format!("... ({cut_bytes} more bytes cut)")
}

/// Bytes `c` takes inside a JSON string, as serde_json writes it.
fn json_char_len(c: char) -> usize {
    match c {
        '"' | '\\' | '\n' | '\r' | '\t' | '\u{8}' | '\u{c}' => 2,
        c if u32::from(c) < 0x20 => 6,
        c => c.len_utf8(),
    }
}

/// Bytes `text` takes inside a JSON string (without the quotes). Every escaped character
/// is ASCII, so counting bytes gives the same as summing [`json_char_len`] over chars.
pub(crate) fn json_str_len(text: &str) -> usize {
    text.len()
        + text
            .bytes()
            .map(|b| match b {
                b'"' | b'\\' | b'\n' | b'\r' | b'\t' | 0x08 | 0x0c => 1,
                0..0x20 => 5,
                _ => 0,
            })
            .sum::<usize>()
}

/// Cuts `text` at a character boundary so that it, with the [`cut_note`] appended, takes
/// at most `budget` bytes inside a JSON string. Leaves it alone when it already fits, or
/// when the cut text with its note would not be shorter than the original (a budget
/// smaller than the note). Returns whether it cut.
pub(crate) fn cut_to(text: &mut String, budget: usize) -> bool {
    let total = json_str_len(text);
    if total <= budget {
        return false;
    }
    // The note's own length grows with the number it holds, which is at most text.len().
    let note_len = cut_note(text.len()).len();
    let keep_budget = budget.saturating_sub(note_len);
    let mut used = 0;
    let mut end = 0;
    for (index, c) in text.char_indices() {
        let len = json_char_len(c);
        if used + len > keep_budget {
            break;
        }
        used += len;
        end = index + c.len_utf8();
    }
    if used + note_len >= total {
        return false;
    }
    let note = cut_note(text.len() - end);
    text.truncate(end);
    text.push_str(&note);
    true
}

/// The size of `err`'s text as the model gets it: JSON-encoded, quotes included, the
/// way [`Registry::dispatch`](super::Registry::dispatch) measures a string result.
pub(crate) fn error_len(err: &ToolError) -> usize {
    json_str_len(&err.to_string()) + 2
}

/// `err` with its free text (messages, paths, echoed names) cut so that its whole text is
/// at most `cap` bytes as a JSON string; the longest field is cut first. An error that
/// fits is returned unchanged. When even the fixed wording of the error is longer than
/// `cap` (a cap of a few bytes), every field is cut as far as the note allows.
pub(crate) fn cap_error(mut err: ToolError, cap: usize) -> ToolError {
    let total = error_len(&err);
    if total <= cap {
        return err;
    }
    let mut excess = total - cap;
    let mut fields = text_fields(&mut err);
    fields.sort_by_cached_key(|field| Reverse(json_str_len(field)));
    for field in fields {
        if excess == 0 {
            break;
        }
        let before = json_str_len(field);
        if cut_to(field, before.saturating_sub(excess)) {
            excess = excess.saturating_sub(before - json_str_len(field));
        }
    }
    err
}

/// Every free-text field of `err`: each appears once in its text.
fn text_fields(err: &mut ToolError) -> Vec<&mut String> {
    match err {
        ToolError::UnknownTool { name } => vec![name],
        ToolError::InvalidArguments { tool, message }
        | ToolError::ToolPanicked { tool, message }
        | ToolError::Failed { tool, message }
        | ToolError::InvalidOutput { tool, message }
        | ToolError::LimitExceeded { tool, message, .. }
        | ToolError::QuotaExceeded { tool, message, .. } => vec![tool, message],
        ToolError::TimedOut { tool, .. }
        | ToolError::Cancelled { tool }
        | ToolError::ResultTooLarge { tool, .. } => vec![tool],
        ToolError::FileTooLarge { tool, path, .. } => vec![tool, path],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Limit;

    fn encoded(text: &str) -> usize {
        serde_json::to_string(text).unwrap().len() - 2
    }

    #[test]
    fn json_length_counts_escapes_like_serde_json() {
        for text in [
            "plain",
            "é and 😀",
            "\"quoted\" \\ back",
            "\n\r\t\u{8}\u{c}",
            "\u{0}\u{1}\u{1f}\u{7f}",
        ] {
            assert_eq!(json_str_len(text), encoded(text), "{text:?}");
        }
    }

    #[test]
    fn a_cut_keeps_whole_characters_and_says_how_much_it_left_out() {
        let original = "é".repeat(100);
        let mut text = original.clone();
        assert!(cut_to(&mut text, 60));
        let (kept, note) = text.split_once("... (").unwrap();
        assert!(kept.chars().all(|c| c == 'é'));
        assert_eq!(
            note,
            format!("{} more bytes cut)", original.len() - kept.len())
        );
        assert!(json_str_len(&text) <= 60, "{text}");
        // One more character would not have fitted.
        assert!(json_str_len(&text) + 2 > 60, "{text}");
    }

    #[test]
    fn text_that_fits_or_cannot_shrink_is_left_alone() {
        let mut text = "short".to_owned();
        assert!(!cut_to(&mut text, 5));
        assert_eq!(text, "short");
        // A budget below the note's length: the note alone would be longer than this.
        let mut text = "x".repeat(20);
        assert!(!cut_to(&mut text, 3));
        assert_eq!(text, "x".repeat(20));
    }

    #[test]
    fn escapes_count_toward_the_budget() {
        let mut text = "\u{1}".repeat(1000);
        assert!(cut_to(&mut text, 200));
        assert!(encoded(&text) <= 200, "{}", encoded(&text));
        assert!(text.ends_with(&cut_note(1000 - text.find('.').unwrap())));
    }

    #[test]
    fn the_longest_field_is_cut_first() {
        let err = ToolError::LimitExceeded {
            tool: "t".into(),
            limit: Limit::Memory { bytes: 64 << 20 },
            message: "m".repeat(10_000),
        };
        let capped = cap_error(err, 300);
        assert!(error_len(&capped) <= 300, "{}", error_len(&capped));
        let ToolError::LimitExceeded {
            tool,
            limit,
            message,
        } = capped
        else {
            panic!("the kind is kept")
        };
        assert_eq!(
            (tool.as_str(), limit),
            ("t", Limit::Memory { bytes: 64 << 20 })
        );
        assert!(message.ends_with(" more bytes cut)"), "{message}");
    }
}
