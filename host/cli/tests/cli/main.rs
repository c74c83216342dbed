//! End-to-end tests of the `host` binary, as a child process (`CARGO_BIN_EXE_host`): one
//! test binary with a module per area. It links neither wasmtime nor the plugin host:
//! everything it checks goes through the binary's stdin, stdout, stderr and exit code.
//! Library-level integration tests live in `tests/all` (package `toolhost-tests`).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests: a failed unwrap is a failed test, with its location"
)]

use std::path::Path;
use std::process::Command;

mod approval;
mod cache;
mod cancel;
mod demo;
mod guide;
mod hostile_args;
mod mcp;
mod messages;
mod namespace;
mod new;
mod observe;
mod oci;
mod oneshot;
mod plugin_http;
mod rich;
mod serve_http;
#[cfg(unix)]
mod stdio;
mod tasks;
mod watch;

/// The `host` binary under test, run as by a user who set no `RUST_LOG` (its default
/// log level, whatever the test runner's environment says).
pub(crate) fn host() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_host"));
    command.env_remove("RUST_LOG");
    command
}

/// A temp path as a command-line argument (temp dirs are UTF-8 here).
pub(crate) fn text(path: &Path) -> &str {
    path.to_str().expect("UTF-8 temp path")
}
