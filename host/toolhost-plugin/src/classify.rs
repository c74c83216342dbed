//! What went wrong in a plugin call, as a [`ToolError`] the caller can match.
//!
//! Two channels, kept apart as wasmtime's `TrappableError` does: the guest *returned*
//! (a result, or its own `tool-error`), see [`returned`]; or the call *failed* (trap,
//! interrupt, limit, host error), see [`failed`]. Errors are told apart by downcasting
//! (`wasmtime::Trap`, `PoolConcurrencyLimitError`) and by what the store recorded (a
//! refused memory grow), never by matching the text of the top-level error, which is
//! "error while executing at wasm backtrace ...".
//!
//! The table of which failure becomes which error is in the crate docs (`# Errors`).

use std::time::Duration;

use wasmtime::component::ResourceTableError;
use wasmtime::{PoolConcurrencyLimitError, Trap};

use toolhost::registry::{Limit, ToolError, ToolResult};

use super::error::error_chain;
use super::output::Captured;
use super::PluginLimits;
use crate::v0_2::toolhost::plugin::types::ToolError as GuestError;
use crate::world::Answer;
use toolhost::registry::format_bytes;

/// Stderr lines appended to an error that is not a panic.
const STDERR_TAIL_LINES: usize = 5;
/// Bytes of stderr appended to an error.
const STDERR_TAIL_BYTES: usize = 1024;

/// What is known about a call besides its error.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CallFacts<'a> {
    /// The tool called.
    pub tool: &'a str,
    /// The plugin's limits.
    pub limits: &'a PluginLimits,
    /// The time limit that applied to this call (the plugin's, or the caller's if sooner).
    pub time_limit: Duration,
    /// The size of a memory grow the limiter refused, if any.
    pub refused_grow: Option<usize>,
    /// The guest's stderr.
    pub stderr: &'a Captured,
}

/// `error` with the plugin's secret values replaced in its messages (a guest's error
/// text, a panic message, a stderr tail): an error reaches the model and the log.
pub(crate) fn redacted(error: ToolError, redactor: &crate::plugin_config::Redactor) -> ToolError {
    let clean = |message: String| redactor.redact(&message).into_owned();
    match error {
        ToolError::InvalidArguments { tool, message } => ToolError::InvalidArguments {
            tool,
            message: clean(message),
        },
        ToolError::Failed { tool, message } => ToolError::Failed {
            tool,
            message: clean(message),
        },
        ToolError::ToolPanicked { tool, message } => ToolError::ToolPanicked {
            tool,
            message: clean(message),
        },
        ToolError::LimitExceeded {
            tool,
            limit,
            message,
        } => ToolError::LimitExceeded {
            tool,
            limit,
            message: clean(message),
        },
        other => other,
    }
}

/// The [`ToolError`] for a call that trapped or failed on the host side.
pub(crate) fn failed(err: &wasmtime::Error, facts: &CallFacts<'_>) -> ToolError {
    let tool = facts.tool.to_owned();
    let trap = err.downcast_ref::<Trap>().copied();
    if trap == Some(Trap::Interrupt) {
        return timed_out(facts);
    }
    if trap == Some(Trap::OutOfFuel) {
        let fuel = facts.limits.fuel.unwrap_or(u64::MAX);
        return ToolError::LimitExceeded {
            tool,
            limit: Limit::Fuel { units: fuel },
            message: with_stderr(
                format!("the plugin used all its fuel ({fuel} units) before it finished; ask for less work per call"),
                facts.stderr,
            ),
        };
    }
    if let Some(desired) = facts.refused_grow {
        return memory_exceeded(desired, facts);
    }
    if err.is::<PoolConcurrencyLimitError>() {
        return ToolError::LimitExceeded {
            tool,
            limit: Limit::ConcurrentInstances,
            message: "too many plugin calls are running at once; try again shortly".into(),
        };
    }
    if matches!(
        err.downcast_ref::<ResourceTableError>(),
        Some(ResourceTableError::Full)
    ) {
        let cap = facts.limits.max_handles;
        return ToolError::LimitExceeded {
            tool,
            limit: Limit::Handles { count: cap.into() },
            message: with_stderr(
                format!("the plugin held more than {cap} host handles (pollables, streams) at once and was stopped; drop each handle when done with it"),
                facts.stderr,
            ),
        };
    }
    let message = match (panic_message(&facts.stderr.text), trap) {
        (Some(panic), _) => panic,
        (None, Some(trap)) => with_stderr(trap.to_string(), facts.stderr),
        (None, None) => with_stderr(error_chain(err), facts.stderr),
    };
    ToolError::ToolPanicked { tool, message }
}

/// The error for a call stopped at its deadline.
pub(crate) fn timed_out(facts: &CallFacts<'_>) -> ToolError {
    ToolError::TimedOut {
        tool: facts.tool.to_owned(),
        limit: facts.time_limit,
    }
}

fn memory_exceeded(desired: usize, facts: &CallFacts<'_>) -> ToolError {
    let cap = format_bytes(facts.limits.memory_bytes);
    ToolError::LimitExceeded {
        tool: facts.tool.to_owned(),
        limit: Limit::Memory {
            bytes: facts.limits.memory_bytes,
        },
        message: with_stderr(
            format!(
                "the plugin tried to grow its memory to {}, over its {cap} limit, and stopped; ask for less data per call",
                format_bytes(desired as u64)
            ),
            facts.stderr,
        ),
    }
}

/// The result of a call whose guest returned: its own error, its result text checked
/// for size and parsed as JSON, or its 0.3.0 `tool-result` converted
/// ([`crate::v0_3::result`]).
pub(crate) fn returned(
    result: Result<Answer, GuestError>,
    tool: &str,
    limits: &PluginLimits,
) -> Result<ToolResult, ToolError> {
    let text = match result {
        Ok(Answer::Json(text)) => text,
        Ok(Answer::Rich(result)) => return crate::v0_3::result::convert(result, tool, limits),
        Err(error) => return Err(guest_error(error, tool)),
    };
    returned_json(text, tool, limits)
}

/// A guest's own error as the registry's.
fn guest_error(error: GuestError, tool: &str) -> ToolError {
    let tool = tool.to_owned();
    match error {
        GuestError::InvalidArguments(message) => ToolError::InvalidArguments { tool, message },
        GuestError::Failed(message) => ToolError::Failed { tool, message },
    }
}

/// A 0.2.0 (or 0.1.0) result: JSON text checked for size and parsed.
fn returned_json(text: String, tool: &str, limits: &PluginLimits) -> Result<ToolResult, ToolError> {
    let tool = tool.to_owned();
    let cap = limits.max_output_bytes;
    if text.len() > cap {
        return Err(ToolError::LimitExceeded {
            tool,
            limit: Limit::Output { bytes: cap as u64 },
            message: format!(
                "the plugin returned {} of result JSON, over its limit of {}; ask for less (a smaller range, a narrower query)",
                format_bytes(text.len() as u64),
                format_bytes(cap as u64)
            ),
        });
    }
    match serde_json::from_str::<serde_json::Value>(&text) {
        Ok(value) => Ok(ToolResult::new(value)),
        Err(err) => Err(ToolError::Failed {
            tool,
            message: format!(
                "the plugin returned invalid JSON: {err}; this is a fault in the plugin, not in your call"
            ),
        }),
    }
}

/// The Rust panic message in a guest's stderr, as `panicked at src/lib.rs:3:5: message`:
/// the last `thread '…' panicked at` line and what follows it, minus the
/// `note: run with RUST_BACKTRACE` hint.
pub(crate) fn panic_message(stderr: &str) -> Option<String> {
    let start = stderr.rfind("panicked at ")?;
    let text = &stderr[start..];
    let mut parts: Vec<&str> = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with("note: run with `RUST_BACKTRACE") {
            break;
        }
        if !line.is_empty() {
            parts.push(line.trim_end_matches(':'));
        }
    }
    let message = parts.join(": ");
    Some(cut_front(&message, STDERR_TAIL_BYTES))
}

/// `message`, with the last stderr lines appended when there are any.
fn with_stderr(message: String, stderr: &Captured) -> String {
    let tail = stderr.tail(STDERR_TAIL_LINES, STDERR_TAIL_BYTES);
    if tail.is_empty() {
        message
    } else {
        format!("{message}; last stderr lines: {tail}")
    }
}

/// At most `max` bytes of `text`, from its start, at a character boundary.
fn cut_front(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    format!("{}…", &text[..text.floor_char_boundary(max)])
}

#[cfg(test)]
mod tests {
    use super::*;

    const PANIC: &str = "thread '<unnamed>' panicked at src/lib.rs:21:9:\ndivision by zero\nnote: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n";

    fn facts<'a>(limits: &'a PluginLimits, stderr: &'a Captured) -> CallFacts<'a> {
        CallFacts {
            tool: "divide",
            limits,
            time_limit: Duration::from_secs(2),
            refused_grow: None,
            stderr,
        }
    }

    /// A trap as wasmtime reports it: the trap under a backtrace context.
    fn trap(trap: Trap) -> wasmtime::Error {
        wasmtime::Error::new(trap).context("error while executing at wasm backtrace:\n 0: 0x1 - f")
    }

    #[test]
    fn panics_carry_the_message_from_stderr() {
        let limits = PluginLimits::default();
        let stderr = Captured {
            text: PANIC.into(),
            dropped: 0,
        };
        let err = failed(
            &trap(Trap::UnreachableCodeReached),
            &facts(&limits, &stderr),
        );
        assert_eq!(
            err,
            ToolError::ToolPanicked {
                tool: "divide".into(),
                message: "panicked at src/lib.rs:21:9: division by zero".into()
            }
        );
    }

    #[test]
    fn traps_without_panic_name_the_trap_and_stderr() {
        let limits = PluginLimits::default();
        let quiet = Captured::default();
        let err = failed(&trap(Trap::StackOverflow), &facts(&limits, &quiet));
        assert_eq!(
            err,
            ToolError::ToolPanicked {
                tool: "divide".into(),
                message: "wasm trap: call stack exhausted".into()
            }
        );
        let chatty = Captured {
            text: "a\nb\n".into(),
            dropped: 0,
        };
        let err = failed(&trap(Trap::MemoryOutOfBounds), &facts(&limits, &chatty));
        let ToolError::ToolPanicked { message, .. } = err else {
            panic!("{err:?}")
        };
        assert_eq!(
            message,
            "wasm trap: out of bounds memory access; last stderr lines: a | b"
        );
    }

    #[test]
    fn interrupt_is_a_timeout_with_the_applied_limit() {
        let limits = PluginLimits::default();
        let stderr = Captured::default();
        let err = failed(&trap(Trap::Interrupt), &facts(&limits, &stderr));
        assert_eq!(
            err,
            ToolError::TimedOut {
                tool: "divide".into(),
                limit: Duration::from_secs(2)
            }
        );
    }

    #[test]
    fn refused_grow_beats_the_abort_trap() {
        let limits = PluginLimits::default();
        let stderr = Captured {
            text: "memory allocation of 1048576 bytes failed\n".into(),
            dropped: 0,
        };
        let mut facts = facts(&limits, &stderr);
        facts.refused_grow = Some(65 << 20);
        let err = failed(&trap(Trap::UnreachableCodeReached), &facts);
        assert_eq!(
            err,
            ToolError::LimitExceeded {
                tool: "divide".into(),
                limit: Limit::Memory { bytes: 64 << 20 },
                message: "the plugin tried to grow its memory to 65 MiB, over its 64 MiB limit, and stopped; ask for less data per call; last stderr lines: memory allocation of 1048576 bytes failed".into()
            }
        );
    }

    #[test]
    fn a_full_resource_table_is_the_handles_limit() {
        let limits = PluginLimits {
            max_handles: 8,
            ..PluginLimits::default()
        };
        let stderr = Captured::default();
        let err = wasmtime::Error::new(ResourceTableError::Full)
            .context("error while executing at wasm backtrace:\n 0: 0x1 - f");
        assert_eq!(
            failed(&err, &facts(&limits, &stderr)),
            ToolError::LimitExceeded {
                tool: "divide".into(),
                limit: Limit::Handles { count: 8 },
                message: "the plugin held more than 8 host handles (pollables, streams) at once and was stopped; drop each handle when done with it".into()
            }
        );
    }

    #[test]
    fn fuel_is_a_limit() {
        let limits = PluginLimits {
            fuel: Some(1000),
            ..PluginLimits::default()
        };
        let stderr = Captured::default();
        let err = failed(&trap(Trap::OutOfFuel), &facts(&limits, &stderr));
        assert!(
            matches!(
                &err,
                ToolError::LimitExceeded {
                    limit: Limit::Fuel { units: 1000 },
                    ..
                }
            ),
            "{err:?}"
        );
    }

    #[test]
    fn host_errors_are_crashes_with_their_causes() {
        let limits = PluginLimits::default();
        let stderr = Captured::default();
        let err = wasmtime::Error::msg("resource limit exceeded").context("instantiation failed");
        assert_eq!(
            failed(&err, &facts(&limits, &stderr)),
            ToolError::ToolPanicked {
                tool: "divide".into(),
                message: "instantiation failed: resource limit exceeded".into()
            }
        );
    }

    #[test]
    fn returned_results_are_checked_and_parsed() {
        let limits = PluginLimits {
            max_output_bytes: 10,
            ..PluginLimits::default()
        };
        let returned = |result| returned(result, "divide", &limits);
        assert_eq!(returned(Ok("\"hi\"".into())).unwrap().content, "hi");
        let err = returned(Ok("[1,2,3,4,5,6]".into())).unwrap_err();
        assert_eq!(
            err,
            ToolError::LimitExceeded {
                tool: "divide".into(),
                limit: Limit::Output { bytes: 10 },
                message: "the plugin returned 13 bytes of result JSON, over its limit of 10 bytes; ask for less (a smaller range, a narrower query)".into()
            }
        );
        let err = returned(Ok("{nope".into())).unwrap_err();
        let ToolError::Failed { message, .. } = err else {
            panic!("{err:?}")
        };
        assert!(
            message.starts_with("the plugin returned invalid JSON: key must be a string"),
            "{message}"
        );
        assert_eq!(
            returned(Err(GuestError::InvalidArguments(
                "by: expected number".into()
            ))),
            Err(ToolError::InvalidArguments {
                tool: "divide".into(),
                message: "by: expected number".into()
            })
        );
        assert_eq!(
            returned(Err(GuestError::Failed(
                "this plugin has no tool named `x`".into()
            ))),
            Err(ToolError::Failed {
                tool: "divide".into(),
                message: "this plugin has no tool named `x`".into()
            })
        );
    }

    #[test]
    fn panic_message_takes_the_last_panic() {
        assert_eq!(panic_message("hello\n"), None);
        let two = format!("thread 'a' panicked at x.rs:1:1:\nfirst\n{PANIC}");
        assert_eq!(
            panic_message(&two).unwrap(),
            "panicked at src/lib.rs:21:9: division by zero"
        );
    }
}
