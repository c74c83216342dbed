//! Values as typed on the command line: durations (`30s`, `500ms`, `2m`, `1m30s`), sizes
//! (`1MiB`, `64MiB`, `1048576`) and plugin names (`word_tools`), parsed for clap.

use std::num::NonZeroUsize;
use std::time::Duration;

/// Parses a duration: one or more `<integer><unit>` parts with units `ms`, `s`, `m`, `h`
/// (`500ms`, `30s`, `2m`, `1m30s`). A bare number is refused, since its unit would be a
/// guess; so is zero, which would stop every call at once.
///
/// ```
/// use std::time::Duration;
/// use crate::args::values::parse_duration;
///
/// assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
/// assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
/// assert!(parse_duration("30").is_err());
/// ```
///
/// # Errors
/// A message saying what is wrong and giving examples.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let hint = "write whole numbers with a unit (ms, s, m, h), e.g. 500ms, 30s, 2m or 1m30s";
    let text = text.trim();
    if text.is_empty() {
        return Err(format!("empty duration; {hint}"));
    }
    let mut total = Duration::ZERO;
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(format!("\"{text}\" is not a duration; {hint}"));
        }
        let number: u64 = rest[..digits]
            .parse()
            .map_err(|_| format!("\"{text}\" is too large a duration; {hint}"))?;
        rest = &rest[digits..];
        let unit_len = rest.bytes().take_while(u8::is_ascii_alphabetic).count();
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let part = match unit {
            "ms" => Some(Duration::from_millis(number)),
            "s" => Some(Duration::from_secs(number)),
            "m" => number.checked_mul(60).map(Duration::from_secs),
            "h" => number.checked_mul(3600).map(Duration::from_secs),
            "" if rest.is_empty() => return Err(format!("\"{text}\" has no unit; {hint}")),
            "" => return Err(format!("\"{text}\" is not a duration; {hint}")),
            other => return Err(format!("unknown unit \"{other}\" in \"{text}\"; {hint}")),
        };
        total = part
            .and_then(|part| total.checked_add(part))
            .ok_or_else(|| format!("\"{text}\" is too large a duration; {hint}"))?;
    }
    if total.is_zero() {
        return Err(format!("the duration must be more than zero; {hint}"));
    }
    Ok(total)
}

/// Parses a size in bytes: an integer, optionally followed by a unit: `B`, the binary
/// `KiB`, `MiB`, `GiB` (powers of 1024) or the decimal `KB`, `MB`, `GB` (powers of 1000),
/// case-insensitively (`1MiB`, `64MiB`, `1048576`, `500KB`).
///
/// ```
/// use crate::args::values::parse_size;
///
/// assert_eq!(parse_size("64MiB"), Ok(64 * 1024 * 1024));
/// assert_eq!(parse_size("1048576"), Ok(1 << 20));
/// assert_eq!(parse_size("2 KB"), Ok(2000));
/// ```
///
/// # Errors
/// A message saying what is wrong and giving examples.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let hint = "write a number of bytes, optionally with a unit (B, KiB, MiB, GiB, KB, MB, GB), e.g. 1048576, 1MiB or 64MiB";
    let trimmed = text.trim();
    let digits = trimmed.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return Err(format!("\"{text}\" is not a size; {hint}"));
    }
    let number: u64 = trimmed[..digits]
        .parse()
        .map_err(|_| format!("\"{text}\" is too large; {hint}"))?;
    let multiplier: u64 = match trimmed[digits..].trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kib" => 1 << 10,
        "mib" => 1 << 20,
        "gib" => 1 << 30,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        _ => return Err(format!("\"{text}\" has an unknown unit; {hint}")),
    };
    number
        .checked_mul(multiplier)
        .ok_or_else(|| format!("\"{text}\" is too large; {hint}"))
}

/// A whole number of at least 1 (a count flag): `"TEXT" is not a whole number` followed
/// by `hint` when it is not a number, `zero` when it is 0 (each flag says what 0 would do).
pub(crate) fn parse_positive_count(
    text: &str,
    hint: &str,
    zero: &str,
) -> Result<NonZeroUsize, String> {
    let count: usize = text
        .trim()
        .parse()
        .map_err(|_| format!("\"{text}\" is not a whole number{hint}"))?;
    NonZeroUsize::new(count).ok_or_else(|| zero.to_owned())
}

/// Longest plugin name: a tool name is at most 128 characters, a file name should stay short.
const MAX_NAME_CHARS: usize = 64;

/// `--lang`'s value for `NAME`: lower-case letters, digits and `_`, starting with a letter,
/// so that one name serves as the crate, the tool, `NAME.wasm` and `NAME.toml`.
///
/// # Errors
/// A message saying what is wrong and a name that would do.
pub(crate) fn parse_plugin_name(text: &str) -> Result<String, String> {
    let valid_chars = text
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    let starts_with_letter = text.chars().next().is_some_and(|c| c.is_ascii_lowercase());
    if text.is_empty() || text.chars().count() > MAX_NAME_CHARS {
        return Err(format!(
            "a plugin name has 1 to {MAX_NAME_CHARS} characters, e.g. word_tools"
        ));
    }
    if !valid_chars || !starts_with_letter {
        let suggestion: String = text
            .to_ascii_lowercase()
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        let suggestion = suggestion.trim_start_matches(|c: char| !c.is_ascii_lowercase());
        let hint = if suggestion.is_empty() {
            "e.g. word_tools".to_owned()
        } else {
            format!("e.g. {suggestion}")
        };
        return Err(format!(
            "\"{text}\" is not a plugin name: use lower-case letters, digits and _, starting with a letter ({hint}); it names the project, the tool and NAME.wasm"
        ));
    }
    Ok(text.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        let ok = [
            ("30s", Duration::from_secs(30)),
            ("500ms", Duration::from_millis(500)),
            ("2m", Duration::from_secs(120)),
            ("1h", Duration::from_secs(3600)),
            ("1m30s", Duration::from_secs(90)),
            ("1s500ms", Duration::from_millis(1500)),
            (" 10s ", Duration::from_secs(10)),
        ];
        for (text, expected) in ok {
            assert_eq!(parse_duration(text), Ok(expected), "{text}");
        }
        let hint = "write whole numbers with a unit (ms, s, m, h), e.g. 500ms, 30s, 2m or 1m30s";
        let bad = [
            ("30", format!("\"30\" has no unit; {hint}")),
            ("", format!("empty duration; {hint}")),
            ("s", format!("\"s\" is not a duration; {hint}")),
            ("-1s", format!("\"-1s\" is not a duration; {hint}")),
            ("1.5s", format!("\"1.5s\" is not a duration; {hint}")),
            ("3d", format!("unknown unit \"d\" in \"3d\"; {hint}")),
            ("0s", format!("the duration must be more than zero; {hint}")),
            (
                "99999999999999999999s",
                format!("\"99999999999999999999s\" is too large a duration; {hint}"),
            ),
            (
                "18446744073709551615h",
                format!("\"18446744073709551615h\" is too large a duration; {hint}"),
            ),
        ];
        for (text, expected) in bad {
            assert_eq!(parse_duration(text), Err(expected), "{text}");
        }
    }

    #[test]
    fn sizes() {
        let ok = [
            ("1048576", 1 << 20),
            ("1MiB", 1 << 20),
            ("64MiB", 64 << 20),
            ("64mib", 64 << 20),
            ("1 GiB", 1 << 30),
            ("3KiB", 3 << 10),
            ("10B", 10),
            ("500KB", 500_000),
            ("2MB", 2_000_000),
            ("1GB", 1_000_000_000),
            ("0", 0),
        ];
        for (text, expected) in ok {
            assert_eq!(parse_size(text), Ok(expected), "{text}");
        }
        let hint = "write a number of bytes, optionally with a unit (B, KiB, MiB, GiB, KB, MB, GB), e.g. 1048576, 1MiB or 64MiB";
        let bad = [
            ("MiB", format!("\"MiB\" is not a size; {hint}")),
            ("-1", format!("\"-1\" is not a size; {hint}")),
            ("1.5MiB", format!("\"1.5MiB\" has an unknown unit; {hint}")),
            ("4TiB", format!("\"4TiB\" has an unknown unit; {hint}")),
            (
                "99999999999GiB",
                format!("\"99999999999GiB\" is too large; {hint}"),
            ),
        ];
        for (text, expected) in bad {
            assert_eq!(parse_size(text), Err(expected), "{text}");
        }
    }

    #[test]
    fn plugin_names_are_checked_with_a_suggestion() {
        assert_eq!(parse_plugin_name("word_tools").unwrap(), "word_tools");
        assert_eq!(parse_plugin_name("a1").unwrap(), "a1");
        assert_eq!(
            parse_plugin_name("My-Tool").unwrap_err(),
            "\"My-Tool\" is not a plugin name: use lower-case letters, digits and _, starting with a letter (e.g. my_tool); it names the project, the tool and NAME.wasm"
        );
        // A path is not a name: nothing is created outside the folder.
        assert!(parse_plugin_name("../evil")
            .unwrap_err()
            .contains("(e.g. evil)"));
        assert!(parse_plugin_name("/tmp/x").is_err());
        assert!(parse_plugin_name("1abc").is_err());
        assert!(parse_plugin_name("").is_err());
        assert!(parse_plugin_name(&"a".repeat(65)).is_err());
    }
}
