//! `texttools`: one component exporting four tools over `{"text": ...}`: `upper` and
//! `lower` return the text upper- or lower-cased, `reverse` its characters in reverse
//! order, `length` its length in characters. Figure 10 of the bench lists 500 copies of
//! it (2,000 tools) page by page.

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

fn reverse(args: Args, _env: Env) -> Result<String, ToolError> {
    Ok(args.text.chars().rev().collect())
}

fn length(args: Args, _env: Env) -> Result<String, ToolError> {
    Ok(args.text.chars().count().to_string())
}

fn text() -> serde_json::Value {
    schema::object([("text", schema::string("The text."))], ["text"])
}

export_plugin!(|| vec![
    Tool::new("upper", "Upper-case a text.", text(), upper),
    Tool::new("lower", "Lower-case a text.", text(), lower),
    Tool::new("reverse", "Reverse a text's characters.", text(), reverse),
    Tool::new("length", "Count a text's characters.", text(), length),
]);
