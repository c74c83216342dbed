//! What each subcommand does.

use std::io::{Read, Write};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use tracing::{debug, info};

use toolhost::registry::{CallContext, Environment, ToolCall, ToolDefinition};
use toolhost_mcp::McpServer;

use super::args::{CallArgs, Command, InspectArgs, RunArgs, ToolsArgs};
use super::setup::build_registry;
use super::{plugins, EXIT_TOOL_ERROR};

/// Runs one subcommand.
pub(crate) async fn execute(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Run(args) => run(args).await,
        Command::Tools(args) => tools(args),
        Command::Call(args) => call(args).await,
        Command::Inspect(args) => inspect(args),
    }
}

async fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    let toolset = build_registry(&args.registry)?;
    let server =
        McpServer::new(Arc::clone(&toolset.registry)).with_max_in_flight(args.max_in_flight);
    info!(
        session_id = %server.session().session_id,
        "serving {} tool(s): {}",
        toolset.registry.len(),
        toolset.registry.names().join(", ")
    );
    server.serve_stdio().await?;
    Ok(ExitCode::SUCCESS)
}

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

/// One line per tool: its name, padded, and the first sentence of its description's
/// first line (the built-in descriptions are one long paragraph).
fn tools_table(definitions: &[ToolDefinition]) -> String {
    let width = definitions.iter().map(|d| d.name.len()).max().unwrap_or(0);
    definitions
        .iter()
        .map(|d| {
            let line = d.description.lines().next().unwrap_or_default().trim();
            let summary = line.split_once(". ").map_or(line, |(first, _)| first);
            let dot = if summary.len() < line.len() { "." } else { "" };
            let summary = format!("{summary}{dot}");
            format!("{:width$}  {summary}", d.name)
                .trim_end()
                .to_owned()
                + "\n"
        })
        .collect()
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

fn inspect(args: InspectArgs) -> anyhow::Result<ExitCode> {
    let info = plugins::inspect(&args.file, plugins::inspect_config(args.cache_dir))?;
    let text = if args.json {
        serde_json::to_string_pretty(&plugins::info_json(&info))? + "\n"
    } else {
        plugins::info_text(&info)
    };
    print(&text)
}

/// Writes to stdout. A reader that closed early (`host tools | head -1`) is not an error.
fn print(text: &str) -> anyhow::Result<ExitCode> {
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(err) if err.kind() == std::io::ErrorKind::BrokenPipe => Ok(ExitCode::SUCCESS),
        Err(err) => Err(err).context("cannot write to stdout"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn table_aligns_names_and_keeps_the_first_line() {
        let defs = [
            ToolDefinition::new(
                "read_file",
                "Read a file. It has lines.\nMore detail.",
                json!({}),
            ),
            ToolDefinition::new("glob", "  Find paths.  ", json!({})),
            ToolDefinition::new("x", "", json!({})),
        ];
        assert_eq!(
            tools_table(&defs),
            "read_file  Read a file.\nglob       Find paths.\nx\n"
        );
    }
}
