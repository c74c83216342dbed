//! `hostile_vfs_escape`: tries to leave its grant through the host's `files` import.
//!
//! Arguments (optional): `paths`, the paths to read (default below). The result:
//! `{"reads": [{"path", "result", "detail"}...], "write": {..}, "delete": {..},
//! "list": {..}}`, where `result` is `ok` or the file error's kind (`not-found`, `denied`,
//! `invalid-path`, `too-large`, `other`) and `detail` is the content (lossy UTF-8), the
//! listed paths one per line, or the error message. `write` tries `../escape.txt`,
//! `delete` tries `../secret.txt`. Its manifest grants read access only.

use serde_json::{json, Value};
use toolhost_sdk::files::{self, FileError};
use toolhost_sdk::{export_plugin, schema, Env, Tool, ToolError};

/// Paths that leave the VFS root, are absolute, or hide behind policy rules.
const DEFAULT_PATHS: &[&str] = &[
    "../secret.txt",
    "a/../../secret.txt",
    "/etc/passwd",
    "secret/x.txt",
    ".secret.txt",
];

#[derive(serde::Deserialize)]
struct Args {
    #[serde(default)]
    paths: Option<Vec<String>>,
}

fn kind(error: &FileError) -> &'static str {
    match error {
        FileError::NotFound(_) => "not-found",
        FileError::Denied(_) => "denied",
        FileError::InvalidPath(_) => "invalid-path",
        FileError::TooLarge(_) => "too-large",
        _ => "other",
    }
}

fn outcome<T>(result: Result<T, FileError>, detail: impl FnOnce(T) -> String) -> Value {
    match result {
        Ok(value) => json!({ "result": "ok", "detail": detail(value) }),
        Err(error) => json!({ "result": kind(&error), "detail": error.message() }),
    }
}

fn escape(args: Args, _env: Env) -> Result<Value, ToolError> {
    let paths = args
        .paths
        .unwrap_or_else(|| DEFAULT_PATHS.iter().map(|p| (*p).to_owned()).collect());
    let reads: Vec<Value> = paths
        .iter()
        .map(|path| {
            let mut entry = outcome(files::read(path), |file| {
                String::from_utf8_lossy(&file.content).into_owned()
            });
            entry["path"] = Value::from(path.as_str());
            entry
        })
        .collect();
    Ok(json!({
        "reads": reads,
        "write": outcome(files::write("../escape.txt", b"escaped\n", None), |()| String::new()),
        "delete": outcome(files::delete("../secret.txt"), |()| String::new()),
        "list": outcome(files::list(), |entries| {
            entries.into_iter().map(|e| e.path).collect::<Vec<_>>().join("\n")
        }),
    }))
}

export_plugin!(|| vec![Tool::new(
    "hostile_vfs_escape",
    "Tries to read and write files outside its grant (test plugin).",
    schema::object(
        [(
            "paths",
            schema::array(schema::string("A path."), "Paths to try to read."),
        )],
        Vec::<&str>::new(),
    ),
    escape,
)]);
