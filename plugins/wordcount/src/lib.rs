//! `wordcount`: counts the lines, words and bytes of a file in the host's VFS, read through
//! the `files` import (needs the read grant in `wordcount.toml`), and logs one debug line
//! `counting PATH (N bytes)` through the `log` import.

use toolhost_sdk::{export_plugin, files, log, schema, Env, Tool, ToolError};

#[derive(serde::Deserialize)]
struct Args {
    path: String,
}

#[derive(serde::Serialize)]
struct Counts {
    path: String,
    /// Lines as `str::lines` counts them: a last line without a newline counts too.
    lines: usize,
    /// Runs of non-whitespace.
    words: usize,
    bytes: usize,
}

fn wordcount(args: Args, _env: Env) -> Result<Counts, ToolError> {
    let file = files::read(&args.path)?;
    log::debug(&format!(
        "counting {} ({} bytes)",
        args.path,
        file.content.len()
    ));
    let text = String::from_utf8_lossy(&file.content);
    Ok(Counts {
        lines: text.lines().count(),
        words: text.split_whitespace().count(),
        bytes: file.content.len(),
        path: args.path,
    })
}

export_plugin!(|| vec![Tool::new(
    "wordcount",
    "Count the lines, words and bytes of a file.",
    schema::object([("path", schema::string("File to count."))], ["path"]),
    wordcount,
)]);
