//! What each subcommand does.

use std::io::{Read, Write};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use tracing::{debug, info};

use toolhost::registry::{CallContext, Environment, ToolCall, ToolDefinition};
use toolhost_mcp::McpServer;

use super::args::{CallArgs, Command, InspectArgs, NewArgs, RunArgs, ToolsArgs};
use super::setup::{build_registry, build_server_registry};
use super::{plugins, scaffold, EXIT_TOOL_ERROR, EXIT_USAGE};

/// Runs one subcommand.
pub(crate) async fn execute(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        // `serve` is `run` with --http required (args.rs).
        Command::Run(args) | Command::Serve(args) => run(args).await,
        Command::Tools(args) => tools(args),
        Command::Call(args) => call(args).await,
        Command::Inspect(args) => inspect(args),
        Command::Lock(args) => super::oci::lock(args),
        Command::Pull(args) => super::oci::pull(args).await,
        Command::Push(args) => super::oci::push(args).await,
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
    if let Some(addr) = args.http.http {
        crate::http::serve(
            &args.registry,
            &args.http,
            addr,
            args.max_in_flight,
            args.watch,
        )
        .await?;
        return Ok(ExitCode::SUCCESS);
    }
    let toolset = build_server_registry(&args.registry)?;
    let server = McpServer::new(Arc::clone(&toolset.registry))
        .with_max_in_flight(args.max_in_flight)
        .with_max_queued_calls(args.max_queued_calls)
        .with_list_changed(args.watch);
    info!(
        session_id = %server.session().session_id,
        "serving {} tool(s): {}",
        toolset.registry.len(),
        toolset.registry.names().join(", ")
    );
    let watching = start_watching(args.watch, &args.registry, &toolset);
    let served = server.serve_stdio().await;
    if let Some(watching) = watching {
        watching.abort();
    }
    served?;
    // The end of input is the client's way to stop the server: it waits for the exit.
    toolset.finish_optimizing(FINISH_OPTIMIZING).await;
    Ok(ExitCode::SUCCESS)
}

/// How long `host run` waits at the end of its input for the optimized plugin compiles
/// still running ([`crate::Toolset::finish_optimizing`]): enough for a large component.
const FINISH_OPTIMIZING: std::time::Duration = std::time::Duration::from_secs(30);

/// `--watch`: polls the plugins directory while the server runs (abort the task to stop).
pub(crate) fn start_watching(
    watch: bool,
    registry: &crate::args::RegistryArgs,
    toolset: &crate::setup::Toolset,
) -> Option<tokio::task::JoinHandle<()>> {
    let watcher = toolset.watcher().filter(|_| watch)?;
    info!(
        dir = %registry.plugins.as_deref().unwrap_or(std::path::Path::new("")).display(),
        "watching the plugins directory: plugins added, changed or removed are loaded or unloaded without a restart"
    );
    Some(tokio::spawn(watcher.run(
        toolhost_plugin::watch::DEFAULT_POLL_INTERVAL,
        plugins::log_watch_event,
    )))
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

/// One line per tool: its name, padded, and a summary of its description ([`summary`]).
fn tools_table(definitions: &[ToolDefinition]) -> String {
    let width = definitions.iter().map(|d| d.name.len()).max().unwrap_or(0);
    definitions
        .iter()
        .map(|d| {
            format!("{:width$}  {}", d.name, summary(&d.description))
                .trim_end()
                .to_owned()
                + "\n"
        })
        .collect()
}

/// The longest summary `host tools` prints, in characters (the table stays readable in a
/// terminal; `--json` has the whole description).
const SUMMARY_CHARS: usize = 100;

/// The first sentence of the description's first line, if it fits in [`SUMMARY_CHARS`];
/// otherwise as many whole words as fit, followed by an ellipsis. A sentence ends at `.`,
/// `!` or `?` right after a word (not `such as . (`) that is not an abbreviation (`e.g.`),
/// followed by the end of the line or a space.
fn summary(description: &str) -> String {
    let line = description.lines().next().unwrap_or_default().trim();
    let chars: Vec<(usize, char)> = line.char_indices().collect();
    let sentence_end = chars.iter().enumerate().find_map(|(i, &(at, c))| {
        let word = line[..at].rsplit(' ').next().unwrap_or_default();
        let after_word = word.chars().last().is_some_and(|before| {
            before.is_alphanumeric() || matches!(before, ')' | '"' | '\'' | '`' | ']' | '}')
        }) && !word.contains('.');
        let then_space = chars.get(i + 1).is_none_or(|&(_, next)| next == ' ');
        (matches!(c, '.' | '!' | '?') && after_word && then_space).then_some(at + c.len_utf8())
    });
    let sentence = &line[..sentence_end.unwrap_or(line.len())];
    if sentence.chars().count() <= SUMMARY_CHARS {
        return sentence.to_owned();
    }
    // Whole words within the cap (the ellipsis included), without a dangling `,` or `(`.
    let cap = sentence
        .char_indices()
        .nth(SUMMARY_CHARS - 1)
        .map_or(sentence.len(), |(at, _)| at);
    // Up to and including the character at the cap (a space there ends a whole word).
    let upto = cap + sentence[cap..].chars().next().map_or(0, char::len_utf8);
    let cut = match sentence[..upto].rfind(' ') {
        Some(space) if space > 0 => &sentence[..space],
        _ => &sentence[..cap],
    };
    let cut = cut.trim_end_matches(|c: char| !c.is_alphanumeric() && !matches!(c, ')' | '"' | '`'));
    format!("{cut}…")
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
    let info = plugins::inspect(&args.file, plugins::inspect_config(args.cache_dir))?;
    let text = if args.json {
        serde_json::to_string_pretty(&plugins::info_json(&info))? + "\n"
    } else {
        plugins::info_text(&info)
    };
    print(&text)
}

/// Writes to stdout. A reader that closed early (`host tools | head -1`) is not an error.
pub(crate) fn print(text: &str) -> anyhow::Result<ExitCode> {
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

    /// grep's description came out as "... escape regex characters such as ." (cut at the
    /// first ". "): a summary ends at a sentence's end or, when that is too long, at a word
    /// with an ellipsis.
    #[test]
    fn summaries_end_at_a_sentence_or_a_word_with_an_ellipsis() {
        assert_eq!(
            summary("Read a file. Returns {content, size}. More."),
            "Read a file."
        );
        assert_eq!(
            summary("Find paths (e.g. docs/*.md) fast"),
            "Find paths (e.g. docs/*.md) fast"
        );
        assert_eq!(
            summary("Edit a file. old_string is the text."),
            "Edit a file."
        );
        assert_eq!(summary("Find paths. * matches a segment."), "Find paths.");
        assert_eq!(summary("Is it? Yes."), "Is it?");
        // One long word: cut inside it, still with the ellipsis.
        let long = "x".repeat(300);
        assert_eq!(summary(&long).chars().count(), SUMMARY_CHARS);
        let dir = tempfile::tempdir().unwrap();
        let registry = toolhost::registry::Registry::new();
        toolhost::tools::register_vfs_tools(
            &registry,
            toolhost::tools::VfsToolOptions::new(std::sync::Arc::new(
                toolhost::vfs::OsStorage::open(dir.path()).unwrap(),
            )),
        )
        .unwrap();
        let definitions = registry.definitions();
        let grep = definitions.iter().find(|d| d.name == "grep").unwrap();
        let text = summary(&grep.description);
        assert_eq!(
            text,
            "Search the contents of files with a regular expression (RE2 syntax: no look-around or…"
        );
        assert!(text.chars().count() <= SUMMARY_CHARS);
        // Every built-in's summary is a whole sentence or ends with the ellipsis.
        for definition in definitions {
            let text = summary(&definition.description);
            assert!(
                text.ends_with('.') || text.ends_with('…'),
                "{}: {text}",
                definition.name
            );
            assert!(!text.ends_with(" ."), "{}: {text}", definition.name);
        }
    }
}
