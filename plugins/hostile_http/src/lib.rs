//! `hostile_http`: what a malicious plugin tries with the network and its secrets.
//!
//! | tool | what it does |
//! |---|---|
//! | `send` | one request (`method`, `url`, `body_bytes` of body), following redirects; returns status and body size |
//! | `flood` | `count` GETs of `url`; returns how many got an answer and the distinct errors |
//! | `leak` | writes its `SECRET` config value to stdout, stderr and the log, then fails with it in the message |
//! | `env` | returns its whole environment |
//!
//! The tests (tests/all/http.rs) run it against a local server and check that the host
//! refuses, limits and redacts.

use std::collections::BTreeMap;

use toolhost_sdk::{config, export_plugin, http, log, schema, Env, Tool, ToolError};

#[derive(serde::Deserialize)]
struct Send {
    url: String,
    #[serde(default)]
    method: Option<String>,
    #[serde(default)]
    body_bytes: usize,
}

fn send(args: Send, _env: Env) -> Result<serde_json::Value, ToolError> {
    let method = args.method.unwrap_or_else(|| "GET".into());
    let response = http::Request::new(&method, &args.url)
        .body(vec![b'x'; args.body_bytes])
        .send()?;
    Ok(serde_json::json!({
        "status": response.status,
        "body_bytes": response.body.len(),
        "url": response.url,
    }))
}

#[derive(serde::Deserialize)]
struct Flood {
    url: String,
    count: u32,
}

fn flood(args: Flood, _env: Env) -> Result<serde_json::Value, ToolError> {
    let mut answered = 0;
    let mut errors = Vec::new();
    for _ in 0..args.count {
        match http::get(&args.url) {
            Ok(_) => answered += 1,
            Err(err) => {
                let text = err.to_string();
                if !errors.contains(&text) {
                    errors.push(text);
                }
            }
        }
    }
    Ok(serde_json::json!({ "answered": answered, "errors": errors }))
}

fn leak(_args: serde_json::Value, _env: Env) -> Result<String, ToolError> {
    let secret = config::get("SECRET").unwrap_or_default();
    println!("stdout has {secret}");
    eprintln!("stderr has {secret}");
    log::warn(&format!("log has {secret}"));
    Err(ToolError::failed(format!("the error has {secret}")))
}

fn env(_args: serde_json::Value, _env: Env) -> Result<BTreeMap<String, String>, ToolError> {
    Ok(std::env::vars().collect())
}

fn none() -> serde_json::Value {
    schema::object(
        Vec::<(String, serde_json::Value)>::new(),
        Vec::<String>::new(),
    )
}

export_plugin!(|| vec![
    Tool::new(
        "send",
        "Send one HTTP request.",
        schema::object(
            [
                ("url", schema::string("URL.")),
                ("method", schema::string("Method.")),
                ("body_bytes", schema::integer("Body size.")),
            ],
            ["url"],
        ),
        send,
    ),
    Tool::new(
        "flood",
        "Send many requests.",
        schema::object(
            [
                ("url", schema::string("URL.")),
                ("count", schema::integer("How many.")),
            ],
            ["url", "count"],
        ),
        flood,
    ),
    Tool::new("leak", "Leak the secret.", none(), leak),
    Tool::new("env", "Show the environment.", none(), env),
]);
