//! `hostile_compose`: abuses the `registry` import (toolhost:plugin@0.3.0), and composes
//! tools as a code tool would.
//!
//! | tool | behaviour | result |
//! |---|---|---|
//! | `list` | the tools it may call | `{"tools": [names]}` |
//! | `call_once` | `{"tool", "arguments"}`: one call (`arguments` JSON text) | `{"result": <parsed JSON>}` or `{"error": "<kind>", "message": "..."}` |
//! | `flood` | `{"tool", "arguments", "times"}`: `times` calls in one call | `{"ok": a, "errors": b, "first_error": "...", "last_error": "..."}` |
//! | `deep` | `{"tool", "depth"}`: one call whose argument `x` is `depth` nested arrays | as `call_once` |
//! | `big_loop` | `{"tool", "arguments", "times"}`: `times` calls, keeping no result | `{"ok": a, "bytes": n, "errors": b, "first_error": "..."}` |
//! | `late` | `{"spin_ms", "tool", "arguments"}`: spins `spin_ms`, then one call | as `call_once` |
//! | `find_and_read` | `{"pattern"}`: grep (files_with_matches), then read_file of each file | `{"files": [...], "read": [<read_file results>]}` |

use serde_json::{json, Value};
use toolhost_sdk::{export_plugin, registry, schema, Env, Tool, ToolError};

fn outcome(result: Result<String, ToolError>) -> Value {
    match result {
        Ok(text) => match serde_json::from_str::<Value>(&text) {
            Ok(value) => json!({"result": value}),
            Err(err) => json!({"error": "not-json", "message": err.to_string()}),
        },
        Err(ToolError::InvalidArguments(message)) => {
            json!({"error": "invalid-arguments", "message": message})
        }
        Err(err) => json!({"error": "failed", "message": err.to_string()}),
    }
}

fn list(_: Value, _env: Env) -> Result<Value, ToolError> {
    let names: Vec<String> = registry::definitions()
        .into_iter()
        .map(|d| d.name)
        .collect();
    Ok(json!({"tools": names}))
}

#[derive(serde::Deserialize)]
struct Once {
    tool: String,
    arguments: String,
}

fn call_once(args: Once, _env: Env) -> Result<Value, ToolError> {
    Ok(outcome(registry::call(&args.tool, &args.arguments)))
}

#[derive(serde::Deserialize)]
struct Many {
    tool: String,
    arguments: String,
    times: u32,
}

fn flood(args: Many, _env: Env) -> Result<Value, ToolError> {
    let (mut ok, mut errors) = (0u32, 0u32);
    let (mut first_error, mut last_error) = (None, None);
    for _ in 0..args.times {
        match registry::call(&args.tool, &args.arguments) {
            Ok(_) => ok += 1,
            Err(err) => {
                errors += 1;
                first_error.get_or_insert_with(|| err.to_string());
                last_error = Some(err.to_string());
            }
        }
    }
    Ok(json!({"ok": ok, "errors": errors, "first_error": first_error, "last_error": last_error}))
}

#[derive(serde::Deserialize)]
struct Deep {
    tool: String,
    depth: usize,
}

fn deep(args: Deep, _env: Env) -> Result<Value, ToolError> {
    let mut arguments = String::with_capacity(args.depth * 2 + 16);
    arguments.push_str(r#"{"x":"#);
    arguments.extend(std::iter::repeat_n('[', args.depth));
    arguments.extend(std::iter::repeat_n(']', args.depth));
    arguments.push('}');
    Ok(outcome(registry::call(&args.tool, &arguments)))
}

fn big_loop(args: Many, _env: Env) -> Result<Value, ToolError> {
    let (mut ok, mut bytes, mut errors) = (0u32, 0usize, 0u32);
    let mut first_error = None;
    for _ in 0..args.times {
        match registry::call(&args.tool, &args.arguments) {
            Ok(text) => {
                ok += 1;
                bytes += text.len();
            }
            Err(err) => {
                errors += 1;
                first_error.get_or_insert_with(|| err.to_string());
            }
        }
    }
    Ok(json!({"ok": ok, "bytes": bytes, "errors": errors, "first_error": first_error}))
}

#[derive(serde::Deserialize)]
struct Late {
    spin_ms: u64,
    tool: String,
    arguments: String,
}

fn late(args: Late, _env: Env) -> Result<Value, ToolError> {
    let started = std::time::Instant::now();
    while started.elapsed() < std::time::Duration::from_millis(args.spin_ms) {
        std::hint::spin_loop();
    }
    Ok(outcome(registry::call(&args.tool, &args.arguments)))
}

#[derive(serde::Deserialize)]
struct Find {
    pattern: String,
}

fn find_and_read(args: Find, _env: Env) -> Result<Value, ToolError> {
    let found = registry::call_json(
        "grep",
        &json!({"pattern": args.pattern, "output_mode": "files_with_matches"}),
    )?;
    let files = found["files"].as_array().cloned().unwrap_or_default();
    let mut read = Vec::with_capacity(files.len());
    for path in &files {
        read.push(registry::call_json("read_file", &json!({"path": path}))?);
    }
    Ok(json!({"files": files, "read": read}))
}

fn tools() -> Vec<Tool> {
    let string = |what: &str| schema::string(what);
    vec![
        Tool::new(
            "list",
            "Lists the tools it may call.",
            schema::object(Vec::<(String, Value)>::new(), Vec::<String>::new()),
            list,
        ),
        Tool::new(
            "call_once",
            "Calls a tool once.",
            schema::object(
                [
                    ("tool", string("Tool.")),
                    ("arguments", string("Arguments (JSON).")),
                ],
                ["tool", "arguments"],
            ),
            call_once,
        ),
        Tool::new(
            "flood",
            "Calls a tool many times in one call.",
            schema::object(
                [
                    ("tool", string("Tool.")),
                    ("arguments", string("Arguments (JSON).")),
                    ("times", schema::integer("How many.")),
                ],
                ["tool", "arguments", "times"],
            ),
            flood,
        ),
        Tool::new(
            "deep",
            "Calls a tool with deeply nested arguments.",
            schema::object(
                [
                    ("tool", string("Tool.")),
                    ("depth", schema::integer("Nesting.")),
                ],
                ["tool", "depth"],
            ),
            deep,
        ),
        Tool::new(
            "big_loop",
            "Calls a tool with a big result many times.",
            schema::object(
                [
                    ("tool", string("Tool.")),
                    ("arguments", string("Arguments (JSON).")),
                    ("times", schema::integer("How many.")),
                ],
                ["tool", "arguments", "times"],
            ),
            big_loop,
        ),
        Tool::new(
            "late",
            "Spins, then calls a tool.",
            schema::object(
                [
                    ("spin_ms", schema::integer("Spin first, in ms.")),
                    ("tool", string("Tool.")),
                    ("arguments", string("Arguments (JSON).")),
                ],
                ["spin_ms", "tool", "arguments"],
            ),
            late,
        ),
        Tool::new(
            "find_and_read",
            "Greps for a pattern and reads each file that has it.",
            schema::object([("pattern", string("Regex."))], ["pattern"]),
            find_and_read,
        ),
    ]
}

export_plugin!(tools);
