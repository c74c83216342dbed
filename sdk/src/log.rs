//! Lines for the host's log, tagged with the plugin's name by the host.
//!
//! ```no_run
//! toolhost_sdk::log::info("indexing 3 files");
//! toolhost_sdk::log::warn("skipped notes/big.md: over 1 MiB");
//! ```
//!
//! The host cuts long messages. Anything a plugin writes to stdout or stderr is captured
//! too, but goes in without a level.
//!
//! [`progress`] tells a waiting MCP client how far a long call has got:
//!
//! ```no_run
//! for (done, file) in ["a.md", "b.md"].iter().enumerate() {
//!     toolhost_sdk::log::progress(done as u64 + 1, Some(2), Some(&format!("indexed {file}")));
//! }
//! ```

use crate::bindings::toolhost::plugin::log::{log, Level};

/// Logs a debugging detail.
pub fn debug(message: &str) {
    log(Level::Debug, message);
}

/// Logs normal progress.
pub fn info(message: &str) {
    log(Level::Info, message);
}

/// Logs something odd that did not stop the call.
pub fn warn(message: &str) {
    log(Level::Warn, message);
}

/// Logs a failure.
pub fn error(message: &str) {
    log(Level::Error, message);
}

/// Reports how far the running call has got: `done` of `total` (when known), with a
/// message for a person watching. It reaches an MCP client that asked for progress
/// (`notifications/progress`), and costs next to nothing when none did. Make `done` grow
/// with every report: the host drops a value that does not, and forwards at most one
/// report every 100 ms (and the last one, `done == total`).
pub fn progress(done: u64, total: Option<u64>, message: Option<&str>) {
    crate::bindings::toolhost::plugin::log::progress(done, total, message);
}
