//! `host-demo`: the MCP client of `scripts/demo`. It starts the `host run` command given
//! after `--`, plays a scripted session over its stdin/stdout, and prints each step as a
//! person reads it (what was sent, short; what came back, pretty and cut), then a summary.
//! With `--raw` it prints the JSON-RPC transcript instead (`>` sent, `<` received).
//!
//! ```text
//! host-demo [--raw] [--log FILE] -- target/release/host run --plugins plugins/dist ...
//! ```
//!
//! The host's log (its stderr) goes to FILE when given, else to this program's stderr.
//! Exit code 0 when every step answered as the story says, 1 otherwise.

#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "a command-line client: stdout is the story it tells, stderr its own errors"
)]

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, ExitCode, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{json, Value};

/// How long one answer may take (the first waits for the plugins to compile).
const ANSWER_TIMEOUT: Duration = Duration::from_secs(300);
/// Most lines and characters of a result shown.
const SHOW_LINES: usize = 8;
const SHOW_CHARS: usize = 400;

/// One step of the session.
struct Step {
    /// What the step shows, for a person.
    about: &'static str,
    method: &'static str,
    params: Value,
    /// What must come back for the story to hold.
    expect: Expect,
}

#[derive(Clone, Copy, PartialEq)]
enum Expect {
    Success,
    /// An `isError` result: the tool failed and the host reported it.
    ToolError,
}

fn call(name: &str, arguments: Value) -> Value {
    json!({"name": name, "arguments": arguments})
}

fn steps() -> Vec<Step> {
    vec![
        Step {
            about: "the client and the host agree on a protocol version",
            method: "initialize",
            params: json!({"protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "scripts/demo", "version": "1"}}),
            expect: Expect::Success,
        },
        Step {
            about: "the tools a model would be offered: built-in file tools, then the plugins' tools",
            method: "tools/list",
            params: json!({}),
            expect: Expect::Success,
        },
        Step {
            about: "a plugin tool: greet.wasm, a Rust WebAssembly component in the sandbox",
            method: "tools/call",
            params: call("greet", json!({"name": "Ada"})),
            expect: Expect::Success,
        },
        Step {
            about: "a plugin reading a file through its grant (wordcount.toml asks for read access, --plugin-files read allows it)",
            method: "tools/call",
            params: call("wordcount", json!({"path": "notes.md"})),
            expect: Expect::Success,
        },
        Step {
            about: "a built-in file tool over --root",
            method: "tools/call",
            params: call("read_file", json!({"path": "notes.md"})),
            expect: Expect::Success,
        },
        Step {
            about: "a plugin that panics (division by zero): an error result for this one call",
            method: "tools/call",
            params: call("divide", json!({"by": 0})),
            expect: Expect::ToolError,
        },
        Step {
            about: "the same plugin host again: still serving",
            method: "tools/call",
            params: call("greet", json!({"name": "again"})),
            expect: Expect::Success,
        },
    ]
}

struct Options {
    raw: bool,
    log: Option<String>,
    command: Vec<String>,
}

fn parse_options() -> Result<Options, String> {
    let mut args = std::env::args().skip(1);
    let mut options = Options {
        raw: false,
        log: None,
        command: Vec::new(),
    };
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--raw" => options.raw = true,
            "--log" => options.log = Some(args.next().ok_or("--log needs a file")?),
            "--" => {
                options.command = args.collect();
                break;
            }
            other => return Err(format!("unknown argument {other:?}; usage: host-demo [--raw] [--log FILE] -- HOST-RUN-COMMAND...")),
        }
    }
    if options.command.is_empty() {
        return Err("give the host's command after --, e.g. -- target/release/host run".into());
    }
    Ok(options)
}

fn main() -> ExitCode {
    match parse_options().and_then(run) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(message) => {
            eprintln!("host-demo: {message}");
            ExitCode::from(1)
        }
    }
}

/// Plays the session; `Ok(false)` when an answer was not what the story says.
fn run(options: Options) -> Result<bool, String> {
    let stderr = match &options.log {
        Some(path) => Stdio::from(
            std::fs::File::create(path).map_err(|err| format!("cannot create {path}: {err}"))?,
        ),
        None => Stdio::inherit(),
    };
    let mut child = Command::new(&options.command[0])
        .args(&options.command[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .map_err(|err| format!("cannot start {}: {err}", options.command[0]))?;
    let mut stdin = child.stdin.take().ok_or("no stdin")?;
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let (lines, received) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    let log_note = match &options.log {
        Some(path) => format!("the host's log is in {path}"),
        None => "the host's log follows on stderr".into(),
    };
    if !options.raw {
        println!("An MCP client (this demo) talks to `host run` over stdin/stdout; {log_note}.\n");
    }

    let steps = steps();
    let mut summary = Summary::default();
    for (index, step) in steps.iter().enumerate() {
        let id = index + 1;
        let request =
            json!({"jsonrpc": "2.0", "id": id, "method": step.method, "params": step.params});
        send(&mut stdin, &request, options.raw)?;
        if step.method == "initialize" {
            let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
            send(&mut stdin, &initialized, options.raw)?;
        }
        let answer = loop {
            let line = received.recv_timeout(ANSWER_TIMEOUT).map_err(|_| {
                format!(
                    "no answer to step {id} ({}); see the host's log",
                    step.method
                )
            })?;
            if options.raw {
                println!("< {line}");
            }
            let message: Value = serde_json::from_str(&line)
                .map_err(|err| format!("the host wrote a line that is not JSON ({err}): {line}"))?;
            if message["id"] == json!(id) {
                break message;
            }
        };
        let ok = summary.record(step, &answer);
        if !options.raw {
            print_step(id, steps.len(), step, &answer, ok);
        }
    }
    // End of input: a host that kept serving exits cleanly.
    drop(stdin);
    let status = child
        .wait()
        .map_err(|err| format!("waiting for the host: {err}"))?;
    summary.clean_exit = status.success();
    if !options.raw {
        println!("{}", summary.text());
    }
    Ok(summary.story_holds())
}

fn send(stdin: &mut impl Write, message: &Value, raw: bool) -> Result<(), String> {
    if raw {
        println!("> {message}");
    }
    writeln!(stdin, "{message}")
        .and_then(|()| stdin.flush())
        .map_err(|err| format!("the host stopped reading: {err}"))
}

fn print_step(id: usize, total: usize, step: &Step, answer: &Value, ok: bool) {
    println!("[{id}/{total}] {}", step.about);
    let sent = match step.method {
        "tools/call" => format!(
            "{} {}",
            step.params["name"].as_str().unwrap_or_default(),
            step.params["arguments"]
        ),
        method => method.to_owned(),
    };
    println!("  sent:     {sent}");
    let (label, text) = describe(step.method, answer);
    let mut lines = text.lines();
    println!("  {label:<9} {}", lines.next().unwrap_or_default());
    for line in lines {
        println!("            {line}");
    }
    if !ok {
        println!("  (not what this step expects)");
    }
    println!();
}

/// The answer for a person: a label (`received:` or `error:`) and the text.
fn describe(method: &str, answer: &Value) -> (&'static str, String) {
    if let Some(error) = answer.get("error") {
        return (
            "error:",
            format!("protocol error {}: {}", error["code"], error["message"]),
        );
    }
    let result = &answer["result"];
    match method {
        "initialize" => (
            "received:",
            format!(
                "server {} {}, protocol {}",
                result["serverInfo"]["name"].as_str().unwrap_or("?"),
                result["serverInfo"]["version"].as_str().unwrap_or("?"),
                result["protocolVersion"].as_str().unwrap_or("?")
            ),
        ),
        "tools/list" => {
            let names: Vec<&str> = tool_names(result);
            (
                "received:",
                cut(&format!("{} tools: {}", names.len(), names.join(", "))),
            )
        }
        _ => {
            let text = result["content"][0]["text"].as_str().unwrap_or_default();
            let shown = match serde_json::from_str::<Value>(text) {
                Ok(Value::String(text)) => text,
                Ok(value) => serde_json::to_string_pretty(&value).unwrap_or_default(),
                Err(_) => text.to_owned(),
            };
            let label = if result["isError"] == true {
                "error:"
            } else {
                "received:"
            };
            (label, cut(&shown))
        }
    }
}

fn tool_names(result: &Value) -> Vec<&str> {
    result["tools"]
        .as_array()
        .map(|tools| tools.iter().filter_map(|t| t["name"].as_str()).collect())
        .unwrap_or_default()
}

/// At most [`SHOW_LINES`] lines and [`SHOW_CHARS`] characters, with a note of the rest.
fn cut(text: &str) -> String {
    let total_lines = text.lines().count();
    let mut shown: String = text.lines().take(SHOW_LINES).collect::<Vec<_>>().join("\n");
    let mut cut = total_lines > SHOW_LINES;
    if shown.chars().count() > SHOW_CHARS {
        shown = shown.chars().take(SHOW_CHARS).collect();
        cut = true;
    }
    if cut {
        shown.push_str(&format!(" … ({} characters in all)", text.chars().count()));
    }
    shown
}

#[derive(Default)]
struct Summary {
    tools: Vec<String>,
    calls: usize,
    succeeded: usize,
    tool_errors: Vec<String>,
    unexpected: usize,
    served_after_error: bool,
    clean_exit: bool,
}

impl Summary {
    /// Notes one answer; whether it is what the step expects.
    fn record(&mut self, step: &Step, answer: &Value) -> bool {
        let result = &answer["result"];
        let outcome = if answer.get("error").is_some() || result.is_null() {
            None
        } else if result["isError"] == true {
            Some(Expect::ToolError)
        } else {
            Some(Expect::Success)
        };
        if step.method == "tools/list" {
            self.tools = tool_names(result).into_iter().map(str::to_owned).collect();
        }
        if step.method == "tools/call" {
            self.calls += 1;
            match outcome {
                Some(Expect::Success) => {
                    self.succeeded += 1;
                    if !self.tool_errors.is_empty() {
                        self.served_after_error = true;
                    }
                }
                Some(Expect::ToolError) => self
                    .tool_errors
                    .push(step.params["name"].as_str().unwrap_or_default().to_owned()),
                None => {}
            }
        }
        let ok = outcome == Some(step.expect);
        if !ok {
            self.unexpected += 1;
        }
        ok
    }

    fn story_holds(&self) -> bool {
        self.unexpected == 0 && self.served_after_error && self.clean_exit
    }

    fn text(&self) -> String {
        let builtin = self
            .tools
            .iter()
            .filter(|t| toolhost::registry::RESERVED_TOOL_NAMES.contains(&t.as_str()))
            .count();
        let mut text = format!(
            "Summary\n  tools listed:     {} ({builtin} built-in, {} from plugins)\n  calls made:       {} ({} answered, {} error result{}: {})\n",
            self.tools.len(),
            self.tools.len() - builtin,
            self.calls,
            self.succeeded,
            self.tool_errors.len(),
            if self.tool_errors.len() == 1 { "" } else { "s" },
            if self.tool_errors.is_empty() { "none".to_owned() } else { self.tool_errors.join(", ") },
        );
        text.push_str(&format!(
            "  panic contained:  {}\n  still serving:    {}\n",
            if self.served_after_error {
                "yes: the plugin's crash became an error result for that call only"
            } else {
                "NO"
            },
            if self.served_after_error && self.clean_exit {
                "yes: the next call was answered, and the host exited cleanly at the end of input"
            } else {
                "NO"
            }
        ));
        if self.unexpected > 0 {
            text.push_str(&format!(
                "  {} step(s) did not answer as expected\n",
                self.unexpected
            ));
        }
        text
    }
}
