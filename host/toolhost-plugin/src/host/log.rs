//! `toolhost:plugin/log`: a plugin's log lines go to the host log (`tracing`, target
//! `plugin`), with the plugin's and the tool's name attached.
//!
//! # Sandbox
//! Each line is cut to [`MAX_LOG_MESSAGE_BYTES`] and kept on one line, and the plugin's
//! lines (its stdout and stderr included) pass a token bucket shared by all its calls
//! ([`PluginMeter::admit_log`](super::quota::PluginMeter::admit_log): by default 100
//! lines a second, bursts of 1000). Lines over the rate are dropped and counted; one
//! warning says how many when logging resumes or at the end of the call. So a plugin
//! cannot flood the host log, however many calls it gets. The plugin's secret
//! configuration values are replaced by `[REDACTED]` before a line is cut or logged.

use super::ImportCtx;
use crate::v0_2::toolhost::plugin::log::{Host, Level};

/// Longest message kept, in bytes; the rest is cut (a plugin cannot flood one line).
pub(crate) const MAX_LOG_MESSAGE_BYTES: usize = 4 * 1024;

impl Host for ImportCtx {
    fn log(&mut self, level: Level, message: String) {
        if !self.meter.admit_log(&self.tool) {
            return;
        }
        // Secrets out first, then cut: a cut could leave part of a secret behind.
        let message = clean(&self.redactor.redact(&message), MAX_LOG_MESSAGE_BYTES);
        let (plugin, tool) = (&*self.plugin, self.tool.as_str());
        match level {
            Level::Debug => tracing::debug!(target: "plugin", plugin, tool, "{message}"),
            Level::Info => tracing::info!(target: "plugin", plugin, tool, "{message}"),
            Level::Warn => tracing::warn!(target: "plugin", plugin, tool, "{message}"),
            Level::Error => tracing::error!(target: "plugin", plugin, tool, "{message}"),
        }
    }

    fn progress(&mut self, done: u64, total: Option<u64>, message: Option<String>) {
        // The MCP layer keeps reports increasing and throttles them; nothing is built
        // unless the caller asked for progress.
        self.call.report_progress(done, total, || {
            message.map(|message| clean(&self.redactor.redact(&message), MAX_LOG_MESSAGE_BYTES))
        });
    }
}

/// `message` cut to `max` bytes (at a character boundary, with a note of the cut) and
/// with control characters escaped, so one call makes one log line.
pub(crate) fn clean(message: &str, max: usize) -> String {
    let end = message.floor_char_boundary(max);
    let mut out = String::with_capacity(end + 32);
    for c in message[..end].chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    if end < message.len() {
        out.push_str(&format!(" … ({} more bytes cut)", message.len() - end));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_cut_and_kept_on_one_line() {
        assert_eq!(clean("a\nb\tc", 100), "a\\nb\\tc");
        assert_eq!(clean("abcdef", 3), "abc … (3 more bytes cut)");
        assert_eq!(clean("éé", 3), "é … (2 more bytes cut)");
        let long = clean(&"x".repeat(5000), MAX_LOG_MESSAGE_BYTES);
        assert_eq!(long, format!("{} … (904 more bytes cut)", "x".repeat(4096)));
    }
}
