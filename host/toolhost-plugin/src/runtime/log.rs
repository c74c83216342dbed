//! A call's captured stdout and stderr: the plugin's secret values redacted, then sent to
//! the host log one event per line, within the plugin's log rate limit.

use crate::host::log::clean;
use crate::host::quota::PluginMeter;
use crate::output::Captured;
use crate::plugin_config::Redactor;

/// Stdout/stderr lines logged per call (the last ones); a flood is summarised.
const LOGGED_LINES_PER_CALL: usize = 100;
/// Longest stdout/stderr line logged.
const LOGGED_LINE_BYTES: usize = 4 * 1024;

/// `captured` with the plugin's secret values replaced (and, when its start was
/// dropped, its cut first line removed: it could hold the end of a secret).
pub(crate) fn redacted(redactor: &Redactor, captured: Captured) -> Captured {
    if redactor.is_empty() {
        return captured;
    }
    Captured {
        text: redactor
            .redact_tail(&captured.text, captured.dropped > 0)
            .into_owned(),
        dropped: captured.dropped,
    }
}

/// Sends a call's captured output to the host log, one event per line, within the
/// plugin's log rate limit (its stdout and stderr lines count as log lines).
pub(crate) fn log_output(
    plugin: &str,
    meter: &PluginMeter,
    tool: &str,
    stream: &'static str,
    captured: &Captured,
) {
    if captured.text.is_empty() {
        return;
    }
    let lines: Vec<&str> = captured
        .text
        .lines()
        .filter(|line| !line.trim().is_empty())
        .collect();
    let skipped = lines.len().saturating_sub(LOGGED_LINES_PER_CALL);
    if (captured.dropped > 0 || skipped > 0) && meter.admit_log(tool) {
        tracing::info!(target: "plugin", plugin, tool, stream, "({} earlier bytes and {skipped} earlier lines of {stream} not logged)", captured.dropped);
    }
    for line in &lines[skipped..] {
        if !meter.admit_log(tool) {
            continue;
        }
        let line = clean(line, LOGGED_LINE_BYTES);
        match stream {
            "stderr" => tracing::info!(target: "plugin", plugin, tool, stream, "{line}"),
            _ => tracing::debug!(target: "plugin", plugin, tool, stream, "{line}"),
        }
    }
}
