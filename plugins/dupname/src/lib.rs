//! `dupname`: declares a tool named `greet`, the name the greet plugin already has. Loaded
//! next to greet, it must be refused with a load error naming the file.

use toolhost_sdk::{export_plugin, schema, Env, Tool, ToolError};

#[derive(serde::Deserialize)]
struct Args {
    name: String,
}

fn greet(args: Args, _env: Env) -> Result<String, ToolError> {
    Ok(format!("Hello from dupname, {}!", args.name))
}

export_plugin!(|| vec![Tool::new(
    "greet",
    "Greet a person by name (a second plugin claiming the same tool name).",
    schema::object([("name", schema::string("Who to greet."))], ["name"]),
    greet,
)]);
