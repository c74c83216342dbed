//! [`Redactor`]: replaces secret values by [`REDACTED`] in text bound for a log or an
//! error.

use super::REDACTED;
use std::borrow::Cow;
use std::fmt;

/// Replaces secret values by [`REDACTED`] in text bound for a log or an error.
///
/// ```
/// use toolhost_plugin::plugin_config::Redactor;
///
/// let redactor = Redactor::new(["s3cr3t".to_owned()]);
/// assert_eq!(redactor.redact("token=s3cr3t&x=1"), "token=[REDACTED]&x=1");
/// assert_eq!(redactor.redact("nothing here"), "nothing here");
/// ```
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Redactor {
    /// Longest first, so a secret that contains another is replaced whole.
    secrets: Vec<String>,
}

impl fmt::Debug for Redactor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Redactor({} secrets)", self.secrets.len())
    }
}

impl Redactor {
    /// A redactor of `secrets` (empty ones are ignored).
    pub fn new(secrets: impl IntoIterator<Item = String>) -> Self {
        let mut secrets: Vec<String> = secrets.into_iter().filter(|s| !s.is_empty()).collect();
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        secrets.dedup();
        Self { secrets }
    }

    /// Whether there is nothing to redact.
    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    /// `text` with every secret replaced by [`REDACTED`].
    pub fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut out = Cow::Borrowed(text);
        for secret in &self.secrets {
            if out.contains(secret.as_str()) {
                out = Cow::Owned(out.replace(secret.as_str(), REDACTED));
            }
        }
        out
    }

    /// `text` redacted, when it is the tail of a longer output whose start was dropped:
    /// a secret cut by the drop would leave its end at the start of `text`, so the cut
    /// first line is removed too.
    pub fn redact_tail<'a>(&self, text: &'a str, cut: bool) -> Cow<'a, str> {
        if !cut || self.is_empty() {
            return self.redact(text);
        }
        let rest = text.split_once('\n').map_or("", |(_, rest)| rest);
        Cow::Owned(self.redact(rest).into_owned())
    }
}
