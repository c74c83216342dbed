//! `webfetch`: fetches a web page through the host's HTTP allow-list.
//!
//! `{"url": "https://example.com/"}` gives `{"status": 200, "url": ..., "content_type":
//! ..., "body": "<!doctype html>...", "truncated": false}`. The plugin's manifest
//! (`webfetch.toml`) asks for the hosts it may reach; the operator must allow them too
//! (`--plugin-http example.com`). Two optional settings come from the host's
//! configuration: `USER_AGENT`, and the secret `API_TOKEN`, sent as a bearer token (the
//! host keeps it out of its logs and errors).

use toolhost_sdk::{config, export_plugin, http, schema, Env, Tool, ToolError};

/// Characters of the body returned to the model; the rest is cut.
const MAX_BODY_CHARS: usize = 16 * 1024;

#[derive(serde::Deserialize)]
struct Args {
    url: String,
}

fn fetch(args: Args, _env: Env) -> Result<serde_json::Value, ToolError> {
    let mut request = http::Request::get(&args.url).header(
        "user-agent",
        config::get("USER_AGENT").unwrap_or_else(|| "toolhost-webfetch/0.1".into()),
    );
    if let Some(token) = config::get("API_TOKEN") {
        request = request.header("authorization", format!("Bearer {token}"));
    }
    let response = request.send()?;
    let text = response.text();
    let truncated = text.chars().count() > MAX_BODY_CHARS;
    let body: String = text.chars().take(MAX_BODY_CHARS).collect();
    Ok(serde_json::json!({
        "status": response.status,
        "url": response.url,
        "content_type": response.header("content-type"),
        "body": body,
        "truncated": truncated,
    }))
}

fn tools() -> Vec<Tool> {
    let fetch = Tool::new(
        "fetch",
        "Fetch a web page (GET) and return its status, content type and text (the first 16 KiB characters). Only the hosts this tool was granted can be reached.",
        schema::object(
            [("url", schema::string("The http:// or https:// URL to fetch."))],
            ["url"],
        ),
        fetch,
    );
    // Metadata for clients (MCP title and hints): it changes nothing and reaches the web.
    vec![fetch
        .with_title("Fetch a web page")
        .read_only()
        .open_world(true)]
}

export_plugin!(tools);
