//! `hostile_stderr`: writes `lines` lines (default 3) `hostile stderr line {i}` to stderr
//! and `stdout_lines` (default 0) `hostile stdout line {i}` to stdout, then fails with
//! `hostile_stderr failed after writing {lines} lines to stderr`. Many lines test that the
//! host bounds what it captures.

use toolhost_sdk::{export_plugin, schema, Env, Tool, ToolError};

#[derive(serde::Deserialize)]
struct Args {
    #[serde(default = "three")]
    lines: u32,
    #[serde(default)]
    stdout_lines: u32,
}

fn three() -> u32 {
    3
}

fn chatter(args: Args, _env: Env) -> Result<String, ToolError> {
    for i in 1..=args.lines {
        eprintln!("hostile stderr line {i}");
    }
    for i in 1..=args.stdout_lines {
        println!("hostile stdout line {i}");
    }
    Err(ToolError::failed(format!(
        "hostile_stderr failed after writing {} lines to stderr",
        args.lines
    )))
}

export_plugin!(|| vec![Tool::new(
    "hostile_stderr",
    "Writes to stderr, then fails (test plugin).",
    schema::object(
        [
            (
                "lines",
                schema::integer("Lines to write to stderr (default 3).")
            ),
            (
                "stdout_lines",
                schema::integer("Lines to write to stdout (default 0).")
            ),
        ],
        Vec::<&str>::new(),
    ),
    chatter,
)]);
