//! `hostile_imports`: floods the host through its imports, one tool per flood.
//!
//! Every tool stops at the first failed import call and reports how far it got:
//! `{"done": N, "error": null | {"kind", "message"}}`, where `kind` is the file error's
//! kind (`not-found`, `denied`, `invalid-path`, `too-large`, `other`).
//!
//! - `imports_read {paths}`: reads each path in turn (a slow storage stalls it).
//! - `imports_calls {count}`: calls `files.list` `count` times.
//! - `imports_write {count, size, prefix}`: writes `count` files `PREFIX{i}.txt` of `size`
//!   bytes each.
//! - `imports_log {count}`: writes `count` log lines (never fails).

use serde_json::{json, Value};
use toolhost_sdk::files::{self, FileError};
use toolhost_sdk::{export_plugin, log, schema, Env, Tool, ToolError};

fn kind(error: &FileError) -> &'static str {
    match error {
        FileError::NotFound(_) => "not-found",
        FileError::Denied(_) => "denied",
        FileError::InvalidPath(_) => "invalid-path",
        FileError::TooLarge(_) => "too-large",
        _ => "other",
    }
}

/// Runs `step(i)` for `i` in `0..count` until one fails.
fn until_error(count: u64, mut step: impl FnMut(u64) -> Result<(), FileError>) -> Value {
    for i in 0..count {
        if let Err(error) = step(i) {
            return json!({
                "done": i,
                "error": { "kind": kind(&error), "message": error.message() },
            });
        }
    }
    json!({ "done": count, "error": null })
}

#[derive(serde::Deserialize)]
struct Paths {
    paths: Vec<String>,
}

#[derive(serde::Deserialize)]
struct Count {
    count: u64,
}

#[derive(serde::Deserialize)]
struct Writes {
    count: u64,
    size: usize,
    #[serde(default)]
    prefix: String,
}

fn read(args: Paths, _env: Env) -> Result<Value, ToolError> {
    Ok(until_error(args.paths.len() as u64, |i| {
        files::read(&args.paths[i as usize]).map(drop)
    }))
}

fn calls(args: Count, _env: Env) -> Result<Value, ToolError> {
    Ok(until_error(args.count, |_| files::list().map(drop)))
}

fn write(args: Writes, _env: Env) -> Result<Value, ToolError> {
    let content = vec![b'x'; args.size];
    Ok(until_error(args.count, |i| {
        files::write(&format!("{}{i}.txt", args.prefix), &content, None)
    }))
}

fn log_lines(args: Count, _env: Env) -> Result<Value, ToolError> {
    for i in 0..args.count {
        log::info(&format!("flood line {i}"));
    }
    Ok(json!({ "done": args.count, "error": null }))
}

fn count_schema() -> Value {
    schema::object([("count", schema::integer("How many."))], ["count"])
}

export_plugin!(|| vec![
    Tool::new(
        "imports_read",
        "Reads each path in turn (test plugin).",
        schema::object(
            [("paths", schema::array(schema::string("A path."), "Paths to read."))],
            ["paths"],
        ),
        read,
    ),
    Tool::new(
        "imports_calls",
        "Calls files.list `count` times (test plugin).",
        count_schema(),
        calls,
    ),
    Tool::new(
        "imports_write",
        "Writes `count` files of `size` bytes (test plugin).",
        schema::object(
            [
                ("count", schema::integer("How many files.")),
                ("size", schema::integer("Bytes per file.")),
                ("prefix", schema::string("Path prefix of the files.")),
            ],
            ["count", "size"],
        ),
        write,
    ),
    Tool::new(
        "imports_log",
        "Writes `count` log lines (test plugin).",
        count_schema(),
        log_lines,
    ),
]);
