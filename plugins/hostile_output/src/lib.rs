//! `hostile_output`: returns a JSON string of `mib` MiB of `x` (default 10), far above any
//! sane result cap.

use toolhost_sdk::{export_plugin, schema, Env, Tool, ToolError};

#[derive(serde::Deserialize)]
struct Args {
    #[serde(default = "ten")]
    mib: usize,
}

fn ten() -> usize {
    10
}

fn flood(args: Args, _env: Env) -> Result<String, ToolError> {
    Ok("x".repeat(args.mib << 20))
}

export_plugin!(|| vec![Tool::new(
    "hostile_output",
    "Returns a huge string (test plugin).",
    schema::object(
        [(
            "mib",
            schema::integer("Size of the result in MiB (default 10).")
        )],
        Vec::<&str>::new(),
    ),
    flood,
)]);
