//! `hostile_panic`: panics with `hostile panic: {detail}` (`detail` defaults to `boom`).

use toolhost_sdk::{export_plugin, schema, Env, Tool, ToolError};

#[derive(serde::Deserialize)]
struct Args {
    #[serde(default = "boom")]
    detail: String,
}

fn boom() -> String {
    "boom".to_owned()
}

fn explode(args: Args, _env: Env) -> Result<String, ToolError> {
    panic!("hostile panic: {}", args.detail);
}

export_plugin!(|| vec![Tool::new(
    "hostile_panic",
    "Panics (test plugin).",
    schema::object(
        [(
            "detail",
            schema::string("Text put in the panic message (default boom).")
        )],
        Vec::<&str>::new(),
    ),
    explode,
)]);
