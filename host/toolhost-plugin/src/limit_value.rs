//! [`LimitValue`]: the value of one limit, as data. Its own module, below every settings
//! module that compares limits ([`PluginLimits`](crate::PluginLimits), `ImportLimits`,
//! `HttpLimits`), so none of them depends on another to name a value.

use std::time::Duration;

use toolhost::registry::{format_bytes, format_duration};

/// The value of a limit, as data: what
/// [`PluginErrorKind::LimitTooHigh`](crate::PluginErrorKind::LimitTooHigh) carries for the
/// value a manifest asked for and the host's maximum, so a caller can compare them.
///
/// ```
/// use std::time::Duration;
/// use toolhost_plugin::limits::LimitValue;
///
/// assert_eq!(LimitValue::Bytes(128 << 20).to_string(), "128 MiB");
/// assert_eq!(LimitValue::Duration(Duration::from_secs(20)).to_string(), "20s");
/// assert_eq!(LimitValue::Count(1024).to_string(), "1024");
/// assert_eq!(LimitValue::Unlimited.to_string(), "unlimited");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LimitValue {
    /// A size in bytes.
    Bytes(u64),
    /// A count (fuel units, instances, handles, files, lines).
    Count(u64),
    /// A time.
    Duration(Duration),
    /// No limit (fuel off).
    Unlimited,
}

impl std::fmt::Display for LimitValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LimitValue::Bytes(bytes) => f.write_str(&format_bytes(*bytes)),
            LimitValue::Count(count) => write!(f, "{count}"),
            LimitValue::Duration(duration) => f.write_str(&format_duration(*duration)),
            LimitValue::Unlimited => f.write_str("unlimited"),
        }
    }
}
