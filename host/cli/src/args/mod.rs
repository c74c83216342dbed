//! The command line: `host run`, `host tools`, `host call`, `host inspect` and the
//! others, as clap types, with the parsers of the values typed there. It imports nothing
//! of the rest of the command line, which all depends on it.

pub mod http;
pub mod observe;
pub mod oci;
pub mod tasks;
pub mod values;

use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::time::Duration;

use clap::{ArgAction, Args, Parser, Subcommand, ValueEnum};

use toolhost_mcp::limits::{DEFAULT_MAX_IN_FLIGHT, DEFAULT_MAX_QUEUED_CALLS};

use self::http::HttpArgs;
use self::observe::ObserveArgs;
use self::oci::{
    KeygenArgs, LockArgs, PullArgs, PushArgs, SignArgs, KEYGEN_EXAMPLES, LOCK_EXAMPLES,
    PULL_EXAMPLES, PUSH_EXAMPLES, SIGN_EXAMPLES,
};
use self::tasks::TaskArgs;
use self::values::{parse_duration, parse_plugin_name, parse_size};

const MAIN_EXAMPLES: &str = "\
Examples:
  # Serve the built-in file tools over ./notes and every plugin in ./plugins to an MCP client
  host run --root ./notes --plugins ./plugins

  # What the model would be offered, and one call by hand
  host tools --root ./notes --plugins ./plugins
  host call --root ./notes read_file '{\"path\":\"todo.md\"}'

  # What a plugin exports and asks for
  host inspect ./plugins/greet.wasm";

const RUN_EXAMPLES: &str = "\
Examples:
  # Serve ./notes (read and write) plus the plugins in ./plugins, over stdio
  host run --root ./notes --plugins ./plugins

  # Read-only, Markdown only, with the plan tool and a 10 s call limit
  host run --root ./notes --read-only --allow-ext .md --plan --timeout 10s

  # An MCP client's server entry (stdout is the protocol; logs go to stderr)
  {\"command\": \"host\", \"args\": [\"run\", \"--root\", \"/home/me/notes\", \"--plugins\", \"/home/me/plugins\"]}

Exit codes: 0 when stdin ends, 2 for a bad command line, 3 when the tools cannot be set up
(--root or --plugins not a directory, a --cache-dir inside --root or writable by others) or
the client's end of stdout is gone.";

const TOOLS_EXAMPLES: &str = "\
Examples:
  host tools --plugins ./plugins
  host tools --root ./notes --read-only --json

Exit codes: 0, 2 for a bad command line, 3 when the tools cannot be set up.";

const CALL_EXAMPLES: &str = "\
Examples:
  host call --root ./notes write_file '{\"path\":\"a.md\",\"content\":\"# Hi\"}'
  host call --root ./notes read_file '{\"path\":\"a.md\"}'
  host call --plugins ./plugins greet '{\"name\":\"Ada\"}'
  echo '{\"pattern\":\"**/*.md\"}' | host call glob -

Prints the result's content as JSON on stdout. On a tool error, prints
`error [KIND]: MESSAGE` on stderr and exits 1 (KIND is e.g. unknown_tool,
invalid_arguments, tool_panicked, timed_out, failed).

Exit codes: 0 on success, 1 on a tool error, 2 for a bad command line (JSON arguments
that are not one JSON object included), 3 when the tools cannot be set up.";

const INSPECT_EXAMPLES: &str = "\
Examples:
  host inspect ./plugins/greet.wasm
  host inspect ./plugins/wordcount.wasm --json

Shows the tools the component exports, its manifest (NAME.toml next to NAME.wasm) and
the file access and limits it asks for, and what it imports. Nothing is run.

Exit codes: 0, 2 for a bad command line, 3 when the file is not a loadable plugin.";

const SERVE_EXAMPLES: &str = "\
Examples:
  # Serve ./notes to MCP clients on this machine at http://127.0.0.1:8080/mcp
  host serve --http 127.0.0.1:8080 --root ./notes

  # Remote clients with a token, each session in its own directory
  host serve --http 0.0.0.0:8080 --auth-token-file tokens.txt \\
    --session-root-template /srv/mcp/{session} --allow-host mcp.example.com

SIGTERM or Ctrl-C: no new connections; running calls get --shutdown-grace to finish.
See docs/deploy.md for several processes behind a load balancer.

Exit codes: 0 after a shutdown, 2 for a bad command line, 3 when the tools cannot be set
up or the address cannot be served (taken, or public without --auth-token-file).";

/// `host`: serve built-in file tools and WebAssembly plugins to an LLM agent.
#[derive(Debug, Parser)]
#[command(
    name = "host",
    version,
    about = "Sandboxed tool host for LLM agents: built-in file tools and WebAssembly plugins, served over MCP.",
    after_help = MAIN_EXAMPLES
)]
pub struct Cli {
    /// More log output on stderr: -v for debug, -vv for trace. RUST_LOG, when set, wins.
    #[arg(short, long, action = ArgAction::Count, global = true)]
    pub verbose: u8,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the tools as an MCP server over stdio (JSON-RPC 2.0, one message per line).
    #[command(after_help = RUN_EXAMPLES)]
    Run(RunArgs),
    /// List the tool definitions the model would be offered, in order.
    #[command(after_help = TOOLS_EXAMPLES)]
    Tools(ToolsArgs),
    /// Dispatch one tool call and print its result.
    #[command(after_help = CALL_EXAMPLES)]
    Call(CallArgs),
    /// Show what a plugin component exports, asks for and imports, without running it.
    #[command(after_help = INSPECT_EXAMPLES)]
    Inspect(InspectArgs),
    /// Pin the SHA-256 of every plugin of a directory in DIR/plugins.lock.
    #[command(after_help = LOCK_EXAMPLES)]
    Lock(LockArgs),
    /// Fetch a plugin from an OCI registry into a plugin directory, verified and pinned.
    #[command(after_help = PULL_EXAMPLES)]
    Pull(PullArgs),
    /// Publish a plugin component (and its manifest) to an OCI registry; prints its digest.
    #[command(after_help = PUSH_EXAMPLES)]
    Push(PushArgs),
    /// Sign a plugin in an OCI registry (cosign format): the signature goes next to it.
    #[command(after_help = SIGN_EXAMPLES)]
    Sign(SignArgs),
    /// Make a signing key pair: PREFIX.key (private) and PREFIX.pub (public).
    #[command(after_help = KEYGEN_EXAMPLES)]
    Keygen(KeygenArgs),
    /// Serve the tools as an MCP server over Streamable HTTP (`host run --http ADDR`).
    #[command(after_help = SERVE_EXAMPLES, mut_arg("http", |arg| arg.required(true)))]
    Serve(RunArgs),
    /// Create a plugin project (outside this repository) that builds with one command.
    #[command(after_help = NEW_EXAMPLES)]
    New(NewArgs),
}

const NEW_EXAMPLES: &str = "\
Examples:
  host new word_tools                # ./word_tools: Cargo.toml, src/lib.rs, word_tools.toml, build, README.md
  host new word_tools --dir ~/src    # ~/src/word_tools
  host new word_tools --lang python  # app.py, tool.py, test_tool.py, word_tools.toml, build, README.md
  host new word_tools --lang js      # plugin.js, tool.js, tool.test.js, package.json, word_tools.toml, build, README.md
  cd word_tools && cargo test && ./build && host call --plugins dist word_tools '{\"text\":\"hi there\"}'

A Rust project depends on the SDK of the checkout this host was built from (or --sdk PATH);
a Python or JavaScript one builds with that checkout's scripts/pyjs-toolchain.
Nothing is overwritten: an existing folder is refused.

Exit codes: 0, 2 for a bad command line (a name that is not lower_case_with_digits),
3 when the project cannot be created.";

/// `host new`.
#[derive(Debug, Args)]
pub struct NewArgs {
    /// The plugin's name: lower-case letters, digits and _, starting with a letter. It
    /// names the folder, the tool, NAME.wasm and NAME.toml (and, in Rust, the crate).
    #[arg(value_name = "PLUGIN_NAME", value_parser = parse_plugin_name)]
    pub name: String,
    /// The language of the project.
    #[arg(long, value_enum, default_value_t = Lang::Rust)]
    pub lang: Lang,
    /// Create the project folder in DIR [default: the current folder].
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// The toolhost-sdk crate to depend on (the sdk/ folder of a wasm-toolhost checkout)
    /// [default: the one this host was built from]. Only for --lang rust.
    #[arg(long, value_name = "PATH")]
    pub sdk: Option<PathBuf>,
}

/// The languages `host new` writes a project in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Lang {
    /// A Rust crate using toolhost-sdk, built for wasm32-wasip2.
    Rust,
    /// A Python module built by componentize-py (from PyPI).
    #[value(alias = "py")]
    Python,
    /// A JavaScript module built by ComponentizeJS (from npm; needs node).
    #[value(name = "js", alias = "javascript")]
    Js,
}

/// `host run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The tools to serve.
    #[command(flatten)]
    pub registry: RegistryArgs,
    /// Most tool calls running at once. Past it, calls wait in order in a queue
    /// (--max-queued-calls) and the server goes on reading: a cancellation or a ping is
    /// acted on at once. Over HTTP, a call past it is refused (503).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_IN_FLIGHT, value_parser = parse_max_in_flight)]
    pub max_in_flight: NonZeroUsize,
    /// Most tool calls waiting for a place while --max-in-flight run (stdio). A cancelled
    /// call leaves the queue without running. While it is full the server reads no
    /// further message until a queued call starts (nothing is refused; the client's
    /// writes wait).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_QUEUED_CALLS, value_parser = parse_max_queued_calls, conflicts_with = "http")]
    pub max_queued_calls: NonZeroUsize,
    /// Watch --plugins: load a plugin added, reload one changed (its .wasm or manifest),
    /// unload one removed, without a restart; clients hear of it
    /// (notifications/tools/list_changed). A broken new version leaves the old serving.
    #[arg(long, requires = "plugins")]
    pub watch: bool,
    /// Ask the client's user (MCP elicitation) before every call of TOOL runs;
    /// repeatable. `destructive`: every tool that may change anything (whose annotations
    /// do not say readOnlyHint true, or say destructiveHint true), built-ins included.
    /// A plugin whose manifest says `confirm = true` is always asked about. Declined,
    /// dismissed, unanswered within --confirm-timeout, or a client that cannot ask: the
    /// call does not run and the model gets a tool error saying why.
    #[arg(long = "confirm", value_name = "TOOL")]
    pub confirm: Vec<String>,
    /// How long one question to the client's user (an approval, a tool's question)
    /// waits for the answer before it counts as no (at most 1h).
    #[arg(long, value_name = "DURATION", default_value = "120s", value_parser = parse_confirm_timeout)]
    pub confirm_timeout: Duration,
    /// How long tasks run and are kept, and how many.
    #[command(flatten)]
    pub tasks: TaskArgs,
    /// Streamable HTTP instead of stdio (--http ADDR and its flags).
    #[command(flatten)]
    pub http: HttpArgs,
    /// The audit log and the metrics listener.
    #[command(flatten)]
    pub observe: ObserveArgs,
}

/// `--confirm-timeout`: a duration of more than 0, at most an hour.
fn parse_confirm_timeout(text: &str) -> Result<Duration, String> {
    toolhost_mcp::elicit::check_confirm_timeout(parse_duration(text)?)
}

/// `--max-walks`: a whole number of at least 1.
fn parse_max_walks(text: &str) -> Result<NonZeroUsize, String> {
    values::parse_positive_count(
        text,
        "; give how many file walks may run at once, e.g. 2",
        "0 would let no list_files, glob or grep call run; give at least 1",
    )
}

/// `--max-in-flight`: a whole number of at least 1.
fn parse_max_in_flight(text: &str) -> Result<NonZeroUsize, String> {
    values::parse_positive_count(
        text,
        "; give how many tool calls may run at once, e.g. 64",
        "0 would let no tool call run; give at least 1 (default 64)",
    )
}

/// `--max-queued-calls`: a whole number of at least 1.
fn parse_max_queued_calls(text: &str) -> Result<NonZeroUsize, String> {
    values::parse_positive_count(
        text,
        "; give how many tool calls may wait for a place, e.g. 256",
        "0 would stop the reading whenever every call slot is taken; give at least 1 (default 256)",
    )
}

/// `host tools`.
#[derive(Debug, Args)]
pub struct ToolsArgs {
    /// The tools to list.
    #[command(flatten)]
    pub registry: RegistryArgs,
    /// Print the full definitions (name, description, parameters) as a JSON array.
    #[arg(long)]
    pub json: bool,
}

/// `host call`.
#[derive(Debug, Args)]
pub struct CallArgs {
    /// The tools to call into.
    #[command(flatten)]
    pub registry: RegistryArgs,
    /// The tool's name.
    #[arg(value_name = "NAME")]
    pub name: String,
    /// The arguments, a JSON object; `-` reads them from stdin.
    #[arg(value_name = "JSON", default_value = "{}")]
    pub arguments: String,
}

/// `host inspect`.
#[derive(Debug, Args)]
pub struct InspectArgs {
    /// The plugin component (`.wasm`).
    #[arg(value_name = "FILE.wasm")]
    pub file: PathBuf,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// Where compiled components are cached.
    #[arg(long, value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
    /// Offer a plugin's tools and prompts under a namespace (repeatable): NAME=PREFIX,
    /// where NAME is the plugin's file name (with or without .wasm) and PREFIX 1 to 32
    /// characters of a-z and 0-9 starting with a letter; its tool `search` is then
    /// `PREFIX_search`. Replaces the namespace its manifest gives (`namespace = "..."`).
    #[arg(long = "plugin-namespace", value_name = "NAME=PREFIX", value_parser = parse_plugin_namespace)]
    pub plugin_namespace: Vec<(String, String)>,
}

/// How much of the file store a plugin may be granted (its manifest asks; this caps it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PluginFiles {
    /// No plugin gets file access, whatever its manifest asks.
    None,
    /// Plugins may be granted reading.
    Read,
    /// Plugins may be granted reading and writing.
    ReadWrite,
}

/// The flags that decide which tools exist, shared by `run`, `tools` and `call`.
#[derive(Debug, Clone, Args)]
pub struct RegistryArgs {
    /// Load every plugin (`*.wasm`) in this directory. Without it, no plugins.
    #[arg(long, value_name = "DIR")]
    pub plugins: Option<PathBuf>,
    /// The directory the file tools work in, and the only part of the disk they reach.
    #[arg(long, value_name = "PATH", default_value = ".")]
    pub root: PathBuf,
    /// Drop the tools that write (write_file, delete_file, edit_file, multi_edit, move_file).
    #[arg(long)]
    pub read_only: bool,
    /// Drop grep, glob, edit_file, multi_edit and move_file (the v0.3 tool set).
    #[arg(long)]
    pub disable_extended: bool,
    /// Hide paths with a segment starting with `.` or `_`, and refuse them as arguments.
    #[arg(long = "hide-hidden")]
    pub hide_hidden: bool,
    /// Only files with these extensions exist for the tools (comma-separated, e.g. `.md,.txt`).
    #[arg(long = "allow-ext", value_name = "EXTS", value_delimiter = ',')]
    pub allow_ext: Option<Vec<String>>,
    /// Largest file the tools may write or move (bytes, or with a unit: 1MiB, 500KB).
    #[arg(long, value_name = "SIZE", default_value = "1MiB", value_parser = parse_size)]
    pub max_file_bytes: u64,
    /// Largest file read_file and grep read whole into memory (bytes, or with a unit); a
    /// larger one is refused (read_file) or skipped (grep).
    #[arg(long, value_name = "SIZE", default_value = "64MiB", value_parser = parse_size)]
    pub max_read_bytes: u64,
    /// Most file walks (list_files, glob, grep) running at once in the whole process
    /// [default: the number of cores, at least 2]. A call that finds them all busy waits
    /// for one (at most 5 s, at most 4 calls per walk waiting), or is refused at once
    /// with an error that says to retry.
    #[arg(long, value_name = "N", value_parser = parse_max_walks)]
    pub max_walks: Option<NonZeroUsize>,
    /// Time limit of one tool call (e.g. 30s, 500ms, 2m).
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_duration)]
    pub timeout: Duration,
    /// Register no built-in file tools (only the plan tool, if --plan, and plugins).
    #[arg(long)]
    pub no_builtins: bool,
    /// Register the plan tool, todo_write.
    #[arg(long)]
    pub plan: bool,
    /// The most file access a plugin's manifest can be granted, over --root.
    #[arg(long, value_enum, value_name = "ACCESS", default_value = "none")]
    pub plugin_files: PluginFiles,
    /// Wall-time limit of one plugin call for plugins whose manifest sets none [default: 10s].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub plugin_timeout: Option<Duration>,
    /// Memory cap of one plugin instance for plugins whose manifest sets none [default: 64MiB].
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub plugin_memory: Option<u64>,
    /// The most wall time a plugin's manifest may ask for per call [default: the
    /// --plugin-timeout value: a manifest may only lower it].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub plugin_max_timeout: Option<Duration>,
    /// The most memory a plugin's manifest may ask for per instance [default: the
    /// --plugin-memory value: a manifest may only lower it]. Raising it lowers the plugin
    /// calls run at once, to fit --plugin-pool-memory.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub plugin_max_memory: Option<u64>,
    /// The most memory all pooled plugin instances may hold together (calls at once x
    /// the largest plugin memory) [default: 4GiB].
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub plugin_pool_memory: Option<u64>,
    /// Cache compiled plugins here, so the next start does not recompile [default:
    /// $XDG_CACHE_HOME/wasm-toolhost, else ~/.cache/wasm-toolhost]. Refused (exit 3) inside,
    /// equal to or above --root, when another user owns it, or when its group or others
    /// may write it; created 0700.
    #[arg(long, value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
    /// Do not cache compiled plugins: compile them at every start.
    #[arg(long, conflicts_with = "cache_dir")]
    pub no_cache: bool,
    /// Refuse to start (exit 3) when the --plugins directory has no plugins.lock. With a
    /// lock file, only the components (and manifests) it pins load, with or without this.
    #[arg(long, requires = "plugins")]
    pub require_lock: bool,
    /// Load only plugins whose plugins.lock entry was signed by this key (repeatable: any
    /// of the keys), a PEM public key as `host pull --verify-key` takes. The signature the
    /// lock keeps is checked again at each load (and --watch reload), so an edited lock
    /// cannot claim a signer; a plugin not pulled with --verify-key, or added by hand, is
    /// refused with the reason. Implies --require-lock.
    #[arg(long, value_name = "KEY.pub", requires = "plugins")]
    pub require_signer: Vec<PathBuf>,
    /// A host plugins may send HTTP requests to, when their manifest asks for it
    /// (repeatable): `[http://]host[:port]`, `*.example.org` for its sub-domains, e.g.
    /// `api.github.com`, `http://127.0.0.1:8080`. https unless http:// is written. None by
    /// default: plugins get no network.
    #[arg(long = "plugin-http", value_name = "HOST", value_parser = parse_host_pattern)]
    pub plugin_http: Vec<toolhost_plugin::http_policy::HostPattern>,
    /// A private network plugins may reach (repeatable): loopback, private, link-local
    /// and other local addresses are refused unless listed, e.g. `127.0.0.1` or
    /// `10.0.0.0/8`. Checked on the address each request connects to.
    #[arg(long = "plugin-http-allow-net", value_name = "NET", value_parser = parse_allowed_net)]
    pub plugin_http_allow_net: Vec<toolhost_plugin::http_policy::IpNet>,
    /// A configuration value for a plugin (repeatable): NAME.KEY=VALUE, where NAME is the
    /// plugin's file name without .wasm and KEY a key its manifest declares. Visible to
    /// other local users in the process list: give secrets with --plugin-config-env or
    /// --plugin-config-file.
    #[arg(long = "plugin-config", value_name = "NAME.KEY=VALUE")]
    pub plugin_config: Vec<String>,
    /// A configuration value from the host's environment (repeatable): NAME.KEY=ENV_VAR,
    /// or NAME.KEY to read the variable KEY. No other environment variable reaches a
    /// plugin.
    #[arg(long = "plugin-config-env", value_name = "NAME.KEY[=ENV_VAR]")]
    pub plugin_config_env: Vec<String>,
    /// A TOML file of configuration values: one `[NAME]` table per plugin, with
    /// `KEY = "value"` or `KEY = { env = "ENV_VAR" }` lines.
    #[arg(long = "plugin-config-file", value_name = "FILE")]
    pub plugin_config_file: Option<PathBuf>,
    /// Offer a plugin's tools and prompts under a namespace (repeatable): NAME=PREFIX,
    /// where NAME is the plugin's file name (with or without .wasm) and PREFIX 1 to 32
    /// characters of a-z and 0-9 starting with a letter; its tool `search` is then
    /// `PREFIX_search`. Replaces the namespace its manifest gives (`namespace = "..."`).
    #[arg(long = "plugin-namespace", value_name = "NAME=PREFIX", value_parser = parse_plugin_namespace)]
    pub plugin_namespace: Vec<(String, String)>,
    /// Let plugins whose manifest says `[grants] ask = true` ask the client's user during
    /// a call (MCP elicitation: confirm a step, fill in a small form). At most 16
    /// questions a call. Off by default: every question is refused (`not-allowed`).
    #[arg(long)]
    pub plugin_ask: bool,
    /// Let plugins whose manifest asks for `[grants] sampling` ask the client's language
    /// model for completions during a call (MCP sampling: spends the user's tokens).
    /// Bounded by each manifest's grant: requests per call (default 4, at most 16) and
    /// tokens per request (default 1024, at most 32768); 64 KiB per request. Off by
    /// default: every request is refused (`not-allowed`).
    #[arg(long)]
    pub plugin_sampling: bool,
    /// Let plugins whose manifest asks for `[grants] tools` list and call this tool of
    /// the registry they are loaded into (repeatable; '*' for every tool): a code tool
    /// running a model's program that calls them. A plugin calls a tool only when its
    /// manifest names it too; each nested call gets every check of a direct call, under
    /// the calling tool's time limit, at most `max_tool_calls` (default and at most 64)
    /// per call. Off by default: every call is refused as not granted.
    #[arg(long = "plugin-tools", value_name = "NAME")]
    pub plugin_tools: Vec<String>,
}

/// `--plugin-namespace`: `NAME=PREFIX`, NAME a plugin's file name with or without
/// `.wasm`, PREFIX a valid namespace ([`toolhost_plugin::namespace`]).
pub(crate) fn parse_plugin_namespace(text: &str) -> Result<(String, String), String> {
    let (name, prefix) = text.split_once('=').ok_or_else(|| {
        "write NAME=PREFIX, NAME the plugin's file name without .wasm, e.g. github_search=gh"
            .to_owned()
    })?;
    let name = name.trim();
    let name = name.strip_suffix(".wasm").unwrap_or(name);
    if name.is_empty() {
        return Err(
            "the plugin's name before = is empty; write NAME=PREFIX, e.g. github_search=gh".into(),
        );
    }
    toolhost_plugin::namespace::check_namespace(prefix).map_err(|err| err.to_string())?;
    Ok((name.to_owned(), prefix.to_owned()))
}

/// `--plugin-http`: a host pattern.
fn parse_host_pattern(text: &str) -> Result<toolhost_plugin::http_policy::HostPattern, String> {
    text.parse()
        .map_err(|err: toolhost_plugin::http_policy::HostPatternError| err.to_string())
}

/// `--plugin-http-allow-net`: an address or network.
fn parse_allowed_net(text: &str) -> Result<toolhost_plugin::http_policy::IpNet, String> {
    toolhost_plugin::http_policy::parse_allowed_net(text)
}

impl RegistryArgs {
    /// The allowed extensions, each with its leading dot (`md` becomes `.md`), blanks dropped.
    pub fn allowed_extensions(&self) -> Option<Vec<String>> {
        self.allow_ext.as_ref().map(|exts| {
            exts.iter()
                .map(|ext| ext.trim())
                .filter(|ext| !ext.is_empty())
                .map(|ext| {
                    if ext.starts_with('.') {
                        ext.to_owned()
                    } else {
                        format!(".{ext}")
                    }
                })
                .collect()
        })
    }
}

/// [`RegistryArgs`] parsed from their flags alone, as `host run`, `tools` and `call` parse
/// them: for the tests of the modules that take them, with no subcommand to match.
#[cfg(test)]
pub(crate) fn registry_args_from(flags: &[&str]) -> Result<RegistryArgs, clap::Error> {
    #[derive(Parser)]
    #[command(name = "host")]
    struct Flags {
        #[command(flatten)]
        registry: RegistryArgs,
    }
    Flags::try_parse_from(std::iter::once("host").chain(flags.iter().copied()))
        .map(|flags| flags.registry)
}

#[cfg(test)]
mod tests;
