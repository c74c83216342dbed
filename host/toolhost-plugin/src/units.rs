//! Sizes and durations as a person writes them, for limit messages and logs.

use std::time::Duration;

/// `64 MiB`, `1.5 KiB`, `512 bytes`: sizes as a person writes them.
pub fn format_bytes(bytes: u64) -> String {
    const UNITS: [(&str, u64); 3] = [("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)];
    for (unit, size) in UNITS {
        if bytes >= size {
            return if bytes.is_multiple_of(size) {
                format!("{} {unit}", bytes / size)
            } else {
                format!("{:.1} {unit}", bytes as f64 / size as f64)
            };
        }
    }
    format!("{bytes} bytes")
}

/// `10s`, `1.5s`, `250ms`.
pub(crate) fn format_duration(duration: Duration) -> String {
    toolhost::registry::format_duration(duration)
}
