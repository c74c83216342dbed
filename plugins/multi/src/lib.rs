//! `multi`: one component exporting two tools. `upper` and `lower` take `{"text": ...}` and
//! return the text upper- or lower-cased.

use toolhost_sdk::{export_plugin, schema, Env, Tool, ToolError};

#[derive(serde::Deserialize)]
struct Args {
    text: String,
}

fn upper(args: Args, _env: Env) -> Result<String, ToolError> {
    Ok(args.text.to_uppercase())
}

fn lower(args: Args, _env: Env) -> Result<String, ToolError> {
    Ok(args.text.to_lowercase())
}

fn text() -> serde_json::Value {
    schema::object([("text", schema::string("Text to convert."))], ["text"])
}

export_plugin!(|| vec![
    Tool::new("upper", "Upper-case a text.", text(), upper),
    Tool::new("lower", "Lower-case a text.", text(), lower),
]);
