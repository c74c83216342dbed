//! [`Shown`]: a caller-supplied path as error messages show it.

use std::fmt;

/// Displays a caller-supplied path for a message: control characters escaped, and at most
/// [`SHOWN_LEN`] characters (a 10,000-byte path must not flood the model's context).
pub(crate) struct Shown<'a>(pub(crate) &'a str);

/// How many characters of a path a message shows.
const SHOWN_LEN: usize = 120;

impl fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (count, c) in self.0.chars().enumerate() {
            if count == SHOWN_LEN {
                return write!(f, "...({} bytes in all)", self.0.len());
            }
            if c.is_control() || c == '"' || c == '\\' {
                write!(f, "{}", c.escape_default())?;
            } else {
                write!(f, "{c}")?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shown_escapes_and_shortens() {
        assert_eq!(Shown("a\0b\"c\n").to_string(), "a\\u{0}b\\\"c\\n");
        let long = "a".repeat(10_000);
        let shown = Shown(&long).to_string();
        assert_eq!(shown, format!("{}...(10000 bytes in all)", "a".repeat(120)));
    }
}
