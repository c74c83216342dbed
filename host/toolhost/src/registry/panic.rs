//! A panic hook that keeps a panic's report short.
//!
//! [`Registry::dispatch`](super::Registry::dispatch) catches a handler's panic and turns
//! it into [`ToolError::ToolPanicked`](super::ToolError::ToolPanicked), whose text it cuts
//! to the result cap. The process's panic hook runs before that, while the panic is
//! raised, and the standard hook prints the whole message on stderr: a handler panicking
//! with a message built from a 15 MiB argument (globset used to, with the regex of a long
//! glob) would write megabytes of log per call. [`install_panic_hook`] replaces it with
//! one that prints panics as the standard hook does, cutting a message over
//! [`MAX_PANIC_MESSAGE_BYTES`]. The `host` binary installs it at start; a program that
//! embeds the registry and does not set its own hook should call it too.

use std::io::Write;
use std::panic::PanicHookInfo;
use std::sync::Once;

use super::cap::cut_note;

/// Most bytes of a panic message the hook prints (4 KiB). A message a person wrote fits
/// many times over; what it cuts is text a panic carried along from its input (an
/// argument, a pattern), which the log does not need whole.
pub const MAX_PANIC_MESSAGE_BYTES: usize = 4 * 1024;

/// Installs, once per process, a panic hook that prints a panic with a message of up to
/// [`MAX_PANIC_MESSAGE_BYTES`] through the hook that was set before (the standard one,
/// unless the program set its own: its output, backtraces included, is unchanged), and a
/// longer one itself, cut at a character boundary with a note of how much was left out:
///
/// ```text
/// thread 'tokio-runtime-worker' panicked at src/tools/x.rs:10:5:
/// cannot parse xxxxxxxx... (1048000 more bytes cut)
/// ```
///
/// A backtrace follows when `RUST_BACKTRACE` asks for one, as with the standard hook.
pub fn install_panic_hook() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| match info.payload_as_str() {
            Some(message) if message.len() > MAX_PANIC_MESSAGE_BYTES => {
                let report = short_report(info, message);
                // Nothing to do if stderr is gone; a panic inside the hook would abort.
                let _ = std::io::stderr().lock().write_all(report.as_bytes());
            }
            _ => previous(info),
        }));
    });
}

/// The report of a panic whose message is longer than [`MAX_PANIC_MESSAGE_BYTES`].
fn short_report(info: &PanicHookInfo<'_>, message: &str) -> String {
    let thread = std::thread::current();
    let name = thread.name().unwrap_or("<unnamed>");
    let location = info
        .location()
        .map_or_else(|| "an unknown location".to_owned(), ToString::to_string);
    let mut report = format!(
        "\nthread '{name}' panicked at {location}:\n{}\n",
        cut_message(message)
    );
    let backtrace = std::backtrace::Backtrace::capture();
    if backtrace.status() == std::backtrace::BacktraceStatus::Captured {
        report.push_str(&format!("stack backtrace:\n{backtrace}\n"));
    }
    report
}

/// `message` cut to [`MAX_PANIC_MESSAGE_BYTES`] at a character boundary, with the note.
fn cut_message(message: &str) -> String {
    if message.len() <= MAX_PANIC_MESSAGE_BYTES {
        return message.to_owned();
    }
    let end = message.floor_char_boundary(MAX_PANIC_MESSAGE_BYTES);
    format!("{}{}", &message[..end], cut_note(message.len() - end))
}

#[cfg(test)]
mod tests {
    use std::process::Command;

    use super::*;
    use crate::registry::{
        Arguments, CallContext, Environment, Registry, ToolCall, ToolDefinition, ToolError,
        ToolResult,
    };

    /// The size of the panic message the child raises.
    const MESSAGE_BYTES: usize = 1 << 20;

    #[test]
    fn a_long_message_is_cut_at_a_character_boundary() {
        let message = format!("a{}", "é".repeat(MAX_PANIC_MESSAGE_BYTES));
        let cut = cut_message(&message);
        let (kept, note) = cut.split_once("... (").unwrap();
        assert_eq!(kept.len(), MAX_PANIC_MESSAGE_BYTES - 1);
        assert_eq!(
            note,
            format!("{} more bytes cut)", message.len() - kept.len())
        );
        assert_eq!(cut_message("short"), "short");
    }

    /// Not a test of its own: the child process [`a_caught_panic_prints_a_short_report`]
    /// runs (it installs the hook, which is process-wide).
    #[test]
    #[ignore = "run in a child process by a_caught_panic_prints_a_short_report"]
    fn panicking_child() {
        install_panic_hook();
        let registry = Registry::new();
        registry
            .register(
                ToolDefinition::new("boom", "Panics with its input.", serde_json::Value::Null),
                |_c: CallContext, args: Arguments, _e: Environment| async move {
                    if args.raw().len() > 2 {
                        panic!("cannot go on with {}", "x".repeat(MESSAGE_BYTES));
                    }
                    Ok(ToolResult::default())
                },
            )
            .unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let err = runtime
            .block_on(registry.dispatch(
                &CallContext::new(),
                &ToolCall::new("boom", r#"{"a":1}"#),
                &Environment::default(),
            ))
            .unwrap_err();
        assert!(matches!(err, ToolError::ToolPanicked { .. }), "{err:?}");
        // A short message still goes through the standard hook.
        let short = std::panic::catch_unwind(|| panic!("short and sweet"));
        assert!(short.is_err());
    }

    #[test]
    fn a_caught_panic_prints_a_short_report() {
        let output = Command::new(std::env::current_exe().unwrap())
            .args([
                "--ignored",
                "--exact",
                "registry::panic::tests::panicking_child",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("RUST_BACKTRACE", "0")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            output.status.success(),
            "{stdout}\n{}",
            &stderr[..stderr.len().min(2000)]
        );
        assert!(
            stdout.contains("1 passed"),
            "the child test did not run: {stdout}"
        );
        assert!(
            stderr.len() < 4 * MAX_PANIC_MESSAGE_BYTES,
            "{} bytes on stderr for a {MESSAGE_BYTES}-byte panic message",
            stderr.len()
        );
        let kept = MAX_PANIC_MESSAGE_BYTES - "cannot go on with ".len();
        assert!(
            stderr.contains(&format!("panicked at {}:", file!())),
            "{stderr}"
        );
        assert!(
            stderr.contains(&format!(
                "cannot go on with {}... ({} more bytes cut)\n",
                "x".repeat(kept),
                MESSAGE_BYTES - kept
            )),
            "{stderr}"
        );
        // The short panic is printed whole by the standard hook.
        assert!(stderr.contains("short and sweet"), "{stderr}");
    }
}
