//! `divide`: the spec's example of a tool that panics. `{"by":4}` gives `0.25`,
//! `{"by":4,"value":10}` gives `2.5`, `{"by":0}` panics with "division by zero".

use toolhost_sdk::{export_plugin, schema, Env, Tool, ToolError};

#[derive(serde::Deserialize)]
struct Args {
    by: f64,
    #[serde(default = "one")]
    value: f64,
}

fn one() -> f64 {
    1.0
}

fn divide(args: Args, _env: Env) -> Result<f64, ToolError> {
    if args.by == 0.0 {
        // Deliberate: the spec's example of a handler that panics.
        panic!("division by zero");
    }
    Ok(args.value / args.by)
}

export_plugin!(|| vec![Tool::new(
    "divide",
    "Divide `value` (default 1) by `by`.",
    schema::object(
        [
            ("by", schema::number("Divisor.")),
            ("value", schema::number("Dividend (default 1).")),
        ],
        ["by"],
    ),
    divide,
)]);
