//! `greet`: the spec's example tool. `{"name":"Ada"}` gives `"Hello, Ada!"`.

use toolhost_sdk::{export_plugin, schema, Env, Tool, ToolError};

#[derive(serde::Deserialize)]
struct Args {
    name: String,
}

fn greet(args: Args, _env: Env) -> Result<String, ToolError> {
    Ok(format!("Hello, {}!", args.name))
}

export_plugin!(|| vec![Tool::new(
    "greet",
    "Greet a person by name.",
    schema::object([("name", schema::string("Who to greet."))], ["name"]),
    greet,
)]);
