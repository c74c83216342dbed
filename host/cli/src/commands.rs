//! What each subcommand does, and the exit codes they end with: the top of the command
//! line, which the other modules do not import.

use std::io::Read;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use tracing::{debug, info};

use toolhost::registry::{CallContext, Environment, ToolCall};
use toolhost_mcp::{FileResources, McpServer};

use crate::args::{CallArgs, Command, InspectArgs, NewArgs, RunArgs, ToolsArgs};
use crate::output::{print, tools_table};
use crate::setup::{build_registry, build_server_registry, start_watching};
use crate::{http, oci, plugins, scaffold, signing};

/// Exit code of `host call` when the tool returns an error (printed on stderr).
pub(crate) const EXIT_TOOL_ERROR: u8 = 1;
/// Exit code for a command line clap refused (an unknown flag, a bad duration).
pub(crate) const EXIT_USAGE: u8 = 2;
/// Exit code when the tools cannot be set up, the plugin cannot be inspected, or
/// stdin/stdout fail.
pub(crate) const EXIT_SETUP: u8 = 3;

/// Runs one subcommand.
pub(crate) async fn execute(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        // `serve` is `run` with --http required (args/mod.rs).
        Command::Run(args) | Command::Serve(args) => run(args).await,
        Command::Tools(args) => tools(args),
        Command::Call(args) => call(args).await,
        Command::Inspect(args) => inspect(args),
        Command::Lock(args) => oci::lock(args),
        Command::Pull(args) => oci::pull(args).await,
        Command::Push(args) => oci::push(args).await,
        Command::Sign(args) => signing::sign(args).await,
        Command::Keygen(args) => signing::keygen(&args),
        Command::New(args) => new(&args),
    }
}

#[allow(
    clippy::print_stderr,
    reason = "flags that do not go together are a bad command line, reported on stderr"
)]
fn new(args: &NewArgs) -> anyhow::Result<ExitCode> {
    if let Err(problem) = scaffold::check_flags(args) {
        eprintln!("error: {problem}");
        return Ok(ExitCode::from(EXIT_USAGE));
    }
    let project = scaffold::create(args)?;
    print(&scaffold::next_steps(&project, &args.name, args.lang))
}

async fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    // The audit log must be out of the tools' reach: --root, and the session roots' base.
    let mut roots = vec![args.registry.root.clone()];
    if let Some(template) = &args.http.session_root_template {
        let base = template.split('{').next().unwrap_or(template);
        roots.push(std::path::PathBuf::from(base));
    }
    let transport = if args.http.http.is_some() {
        "tcp"
    } else {
        "pipe"
    };
    crate::observe::start(&args.observe, &roots, transport).await?;
    if let Some(addr) = args.http.http {
        let served = http::serve(
            &args.registry,
            &args.http,
            addr,
            args.max_in_flight,
            &args.tasks,
            args.watch,
            (&args.confirm, args.confirm_timeout),
        )
        .await;
        crate::observe::flush();
        served?;
        return Ok(ExitCode::SUCCESS);
    }
    let toolset = build_server_registry(&args.registry)?;
    crate::observe::install_toolset(&toolset.registry, toolset.load_report());
    let mut server = McpServer::new(Arc::clone(&toolset.registry))
        .with_max_in_flight(args.max_in_flight)
        .with_max_queued_calls(args.max_queued_calls)
        .with_list_changed(args.watch)
        .with_approval(toolset.approval(&args.confirm, args.watch)?)
        .with_confirm_timeout(args.confirm_timeout);
    let limits = args.tasks.apply(server.limits());
    server = server.with_limits(limits);
    // The files under --root are offered as resources where the file tools show them.
    if let Some(files) = &toolset.files {
        server = server.with_resources(FileResources::new(files.clone()));
    }
    info!(
        session_id = %server.session().session_id,
        "serving {} tool(s): {}",
        toolset.registry.len(),
        some_names(&toolset.registry.names())
    );
    let watched = server.clone();
    let pool = toolset.plugin_host().cloned();
    crate::observe::watch_server(move || {
        let stats = watched.stats();
        crate::metrics::ServerGauges {
            sessions: 1,
            calls_queued: stats.calls_queued,
            connections: None,
            ..Default::default()
        }
        .with_tasks(&stats)
        .with_pool(pool.as_deref())
    });
    let watching = start_watching(args.watch, &args.registry, &toolset);
    let served = server.serve_stdio().await;
    if let Some(watching) = watching {
        watching.abort();
    }
    crate::observe::flush();
    served?;
    // The end of input is the client's way to stop the server: it waits for the exit.
    toolset.finish_optimizing(FINISH_OPTIMIZING).await;
    Ok(ExitCode::SUCCESS)
}

/// How long `host run` waits at the end of its input for the optimized plugin compiles
/// still running ([`crate::setup::Toolset::finish_optimizing`]): enough for a large component.
const FINISH_OPTIMIZING: std::time::Duration = std::time::Duration::from_secs(30);

fn tools(args: ToolsArgs) -> anyhow::Result<ExitCode> {
    let toolset = build_registry(&args.registry)?;
    let definitions = toolset.registry.definitions();
    let text = if args.json {
        serde_json::to_string_pretty(&definitions)? + "\n"
    } else {
        tools_table(&definitions)
    };
    print(&text)
}

#[allow(
    clippy::print_stderr,
    reason = "`host call` reports the tool's error on stderr"
)]
async fn call(args: CallArgs) -> anyhow::Result<ExitCode> {
    let arguments = if args.arguments == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .context("cannot read the arguments from stdin")?;
        text
    } else {
        args.arguments
    };
    // Broken JSON here is a bad command line (exit 2), said before any set-up, not a
    // tool error the model would get.
    if let Err(problem) = check_arguments(&arguments) {
        eprintln!("error: {problem}");
        return Ok(ExitCode::from(EXIT_USAGE));
    }
    let toolset = build_registry(&args.registry)?;
    let env = Environment::generate();
    debug!(session_id = %env.session_id, turn_id = %env.turn_id, tool = %args.name, "call");
    let outcome = toolset
        .registry
        .dispatch(
            &CallContext::new(),
            &ToolCall::new(args.name, arguments),
            &env,
        )
        .await;
    match outcome {
        Ok(result) => print(&(serde_json::to_string_pretty(&result.content)? + "\n")),
        Err(err) => {
            eprintln!("error [{}]: {err}", err.kind());
            Ok(ExitCode::from(EXIT_TOOL_ERROR))
        }
    }
}

/// What `host call` takes as its JSON argument, for its error messages.
const ARGUMENTS_EXAMPLE: &str = r#"pass one JSON object in single quotes, e.g. host call greet '{"name":"Ada"}', or - to read it from stdin"#;

/// `host call`'s JSON argument must be one JSON object (empty means `{}`).
fn check_arguments(arguments: &str) -> Result<(), String> {
    if arguments.trim().is_empty() {
        return Ok(());
    }
    match serde_json::from_str::<serde_json::Value>(arguments) {
        Ok(serde_json::Value::Object(_)) => Ok(()),
        Ok(other) => Err(format!(
            "the tool's arguments must be a JSON object, got {}; {ARGUMENTS_EXAMPLE}",
            toolhost::registry::json_type(&other)
        )),
        Err(err) => Err(format!(
            "the tool's arguments are not valid JSON ({err}); {ARGUMENTS_EXAMPLE}"
        )),
    }
}

fn inspect(args: InspectArgs) -> anyhow::Result<ExitCode> {
    let mut config = plugins::inspect_config(args.cache_dir).to_builder();
    plugins::set_namespaces(&mut config, &args.plugin_namespace)?;
    let info = plugins::inspect(&args.file, config.build())?;
    let text = if args.json {
        serde_json::to_string_pretty(&plugins::info_json(&info))? + "\n"
    } else {
        plugins::info_text(&info)
    };
    print(&text)
}

/// Tool names shown in the start-up log line: every name up to [`NAMES_SHOWN`], then how
/// many more (a host with 500 plugins would otherwise log a line of thousands of names;
/// `host tools` lists them all).
const NAMES_SHOWN: usize = 20;

/// The first [`NAMES_SHOWN`] of `names`, comma-separated, and a count of the rest.
fn some_names<S: AsRef<str>>(names: &[S]) -> String {
    let shown: Vec<&str> = names.iter().take(NAMES_SHOWN).map(AsRef::as_ref).collect();
    let mut text = shown.join(", ");
    if names.len() > NAMES_SHOWN {
        let more = names.len() - NAMES_SHOWN;
        text.push_str(&format!(" and {more} more (`host tools` lists them all)"));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::some_names;

    #[test]
    fn the_start_up_line_shows_twenty_names_and_counts_the_rest() {
        let few = ["read_file", "greet"];
        assert_eq!(some_names(&few), "read_file, greet");
        let many: Vec<String> = (0..2000).map(|i| format!("t{i}")).collect();
        let line = some_names(&many);
        assert!(line.starts_with("t0, t1, "), "{line}");
        assert!(
            line.contains("t19 and 1980 more (`host tools` lists them all)"),
            "{line}"
        );
        assert!(!line.contains("t20"), "{line}");
        let exactly: Vec<String> = (0..20).map(|i| format!("t{i}")).collect();
        assert!(some_names(&exactly).ends_with("t19"));
    }
}
