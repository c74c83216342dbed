//! The `host` command line: serve the tools to an agent over MCP (`host run`), list them
//! (`host tools`), call one by hand (`host call`), look into a plugin (`host inspect`),
//! start a plugin project (`host new`).
//!
//! `run`, `tools` and `call` take the same flags ([`args::RegistryArgs`]) and build their
//! registry with the same function, [`setup::build_registry`], so what `host tools` lists
//! is what `host run` serves and what `host call` dispatches to.
//!
//! Logs go to stderr, never stdout (in `host run`, stdout is the protocol): `info` for
//! `run`, `warn` for the rest, `-v` for `debug`, `-vv` for `trace`; `RUST_LOG`, when set,
//! wins.
//!
//! Exit codes: `0` success; [`commands::EXIT_TOOL_ERROR`] (1) when `host call`'s tool
//! fails; [`commands::EXIT_USAGE`] (2) for a bad command line; [`commands::EXIT_SETUP`] (3)
//! when the tools cannot be set up (a `--root` or `--plugins` that is not a directory, a
//! file that is not a plugin) or stdin/stdout fail.
//!
//! A binary crate runs no doc tests, so the example of this module is the unit test
//! `tests::tools_read_only_builds_the_read_tools`: parse a command line, build its
//! registry.
//!
//! Imports go one way (docs/architecture.md, "One-way imports"): `commands` on top uses
//! `http`, `oci`, `scaffold`, `setup`, `plugins`; those use `args` (the clap types, which
//! import nothing of the command line) and `output` (printing, which imports nothing of it
//! either).

use std::io::IsTerminal;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

pub mod args;
mod audit;
mod commands;
mod http;
mod metrics;
mod oauth;
mod observe;
mod oci;
mod output;
mod plugins;
mod policy;
mod registry_client;
mod scaffold;
mod secret_file;
pub mod setup;
mod signing;
mod trace;

use args::{Cli, Command};
use commands::{EXIT_SETUP, EXIT_USAGE};

/// The `host` binary: parses the command line, sets up logging, runs the subcommand.
#[allow(
    clippy::print_stderr,
    reason = "the one place a set-up error reaches the user"
)]
pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => {
            // --help and --version are "errors" that print to stdout and succeed.
            let _ = err.print();
            return if err.use_stderr() {
                ExitCode::from(EXIT_USAGE)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    let default_level = match (&cli.command, cli.verbose) {
        (_, 2..) => "trace",
        (_, 1) => "debug",
        (Command::Run(_) | Command::Serve(_), 0) => "info",
        (_, 0) => "warn",
    };
    init_logging(default_level);
    // A tool that panics with a huge message must not flood the log (stderr).
    toolhost::registry::install_panic_hook();
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.enable_all();
    if serves_http(&cli.command) {
        builder.global_queue_interval(HTTP_GLOBAL_QUEUE_INTERVAL);
    }
    let runtime = match builder.build() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("error: cannot start the async runtime: {err}");
            return ExitCode::from(EXIT_SETUP);
        }
    };
    let outcome = runtime.block_on(commands::execute(cli.command));
    // Blocking file work of a call that timed out may still be running; do not wait long.
    runtime.shutdown_timeout(Duration::from_secs(1));
    match outcome {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::from(EXIT_SETUP)
        }
    }
}

/// How many tasks a worker of `host run --http` polls before it looks at the runtime's
/// shared queue: every one. With many connections ready at once (1,000 sessions calling,
/// figure 17 in docs/benchmarks.md), the tasks that overflow a worker's local queue wait
/// in the shared one; tokio's default looks there rarely, and those connections' calls
/// waited far longer than the rest: p99 at 1,000 sessions 99-118 ms against 27-38 ms
/// with this, throughput the same (4 interleaved runs each). Over stdio there is one
/// client and the shared queue stays empty, so `host run` keeps tokio's default.
const HTTP_GLOBAL_QUEUE_INTERVAL: u32 = 1;

/// Whether `command` serves MCP over HTTP (many clients at once).
fn serves_http(command: &Command) -> bool {
    matches!(command, Command::Run(args) | Command::Serve(args) if args.http.http.is_some())
}

/// Logs to stderr at `default_level`, or as `RUST_LOG` says when it is set and valid.
fn init_logging(default_level: &str) {
    let filter = std::env::var("RUST_LOG")
        .ok()
        .filter(|value| !value.trim().is_empty())
        .and_then(|value| EnvFilter::try_new(value).ok())
        .unwrap_or_else(|| EnvFilter::new(log_directives(default_level)));
    // stderr as RUST_LOG (or -v) says, and, beside it with its own filter, the layer that
    // forwards log lines to MCP clients that asked for them (logging/setLevel).
    let stderr = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(false)
        .with_filter(filter);
    let _ = tracing_subscriber::registry()
        .with(stderr)
        .with(toolhost_mcp::log_layer())
        .try_init();
}

/// Our crates (and the plugins' log lines, target `plugin`) at `level`; dependency crates at
/// `warn` at most: at `debug`, Cranelift alone wrote 24,778 lines compiling one plugin.
/// `RUST_LOG` can still ask for them (`RUST_LOG=debug`).
fn log_directives(level: &str) -> String {
    const OURS: [&str; 6] = [
        "host",
        "toolhost",
        "toolhost_plugin",
        "toolhost_mcp",
        "toolhost_oci",
        "plugin",
    ];
    if matches!(level, "error" | "warn") {
        return level.to_owned();
    }
    std::iter::once("warn".to_owned())
        .chain(OURS.iter().map(|target| format!("{target}={level}")))
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use crate::args::{Cli, Command};
    use crate::setup::build_registry;

    fn serves_http_for(argv: &[&str]) -> bool {
        let cli = Cli::try_parse_from(argv).expect("valid command line");
        super::serves_http(&cli.command)
    }

    #[test]
    fn only_http_serving_gets_the_fair_scheduler_setting() {
        assert!(serves_http_for(&["host", "run", "--http", "127.0.0.1:0"]));
        assert!(serves_http_for(&["host", "serve", "--http", "127.0.0.1:0"]));
        assert!(!serves_http_for(&["host", "run"]));
        assert!(!serves_http_for(&["host", "tools"]));
    }

    #[test]
    fn dependencies_stay_at_warn_unless_rust_log_says() {
        assert_eq!(super::log_directives("warn"), "warn");
        assert_eq!(
            super::log_directives("debug"),
            "warn,host=debug,toolhost=debug,toolhost_plugin=debug,toolhost_mcp=debug,toolhost_oci=debug,plugin=debug"
        );
    }

    /// The module docs' example: `host tools --read-only --root DIR` builds the reading
    /// file tools only.
    #[test]
    fn tools_read_only_builds_the_read_tools() {
        let root = tempfile::tempdir().unwrap();
        let cli = Cli::try_parse_from([
            "host",
            "tools",
            "--read-only",
            "--root",
            root.path().to_str().unwrap(),
        ])
        .unwrap();
        let Command::Tools(args) = cli.command else {
            panic!("parsed as another command: {:?}", cli.command)
        };
        let toolset = build_registry(&args.registry).unwrap();
        assert_eq!(
            toolset.registry.names(),
            ["read_file", "list_files", "grep", "glob"]
        );
    }
}
