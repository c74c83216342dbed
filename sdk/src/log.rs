//! Lines for the host's log, tagged with the plugin's name by the host.
//!
//! ```no_run
//! toolhost_sdk::log::info("indexing 3 files");
//! toolhost_sdk::log::warn("skipped notes/big.md: over 1 MiB");
//! ```
//!
//! The host cuts long messages. Anything a plugin writes to stdout or stderr is captured
//! too, but goes in without a level.

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
