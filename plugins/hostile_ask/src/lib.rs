//! `hostile_ask`: abuses the `interaction` and `sampling` imports (toolhost:plugin@0.3.0).
//!
//! | tool | behaviour | result |
//! |---|---|---|
//! | `ask_confirm_many` | `{"count": N}`: N confirms in one call | `{"yes": a, "no": b, "errors": {"<kind>": n}, "first_error": "..."}` |
//! | `ask_huge_schema` | `{"bytes": N}`: one `ask` with a schema of N bytes (a valid object schema padded by a long description) | `{"answer": ...}` or `{"error": "<kind>", "message": "..."}` |
//! | `ask_confirm_once` | one confirm | `{"answer": true/false}` or `{"error": "<kind>", "message": "..."}` |
//! | `sample_many` | `{"count": N}`: N createMessage requests (10 tokens each) in one call | `{"answered": a, "errors": {"<kind>": n}, "first_error": "..."}` |
//! | `sample_tokens` | `{"max_tokens": N}`: one request asking for N tokens | `{"text": ...}` or `{"error": "<kind>", "message": "..."}` |
//! | `sample_huge` | `{"bytes": N}`: one request whose message is N bytes | as `sample_tokens` |
//! | `sample_once` | one request of 10 tokens | `{"role", "text", "model", "stop_reason"}` or `{"error": "<kind>", "message": "..."}` |

use std::collections::BTreeMap;

use serde_json::{json, Value};
use toolhost_sdk::interaction::{self, InteractionError};
use toolhost_sdk::sampling::{self, Message, Request, Role, SamplingContent};
use toolhost_sdk::{export_plugin, schema, Env, Tool, ToolError};

fn kind(error: &InteractionError) -> (&'static str, String) {
    match error {
        InteractionError::NotAllowed(m) => ("not-allowed", m.clone()),
        InteractionError::Unsupported(m) => ("unsupported", m.clone()),
        InteractionError::TimedOut(m) => ("timed-out", m.clone()),
        InteractionError::Invalid(m) => ("invalid", m.clone()),
        _ => ("other", error.to_string()),
    }
}

#[derive(serde::Deserialize)]
struct Count {
    count: u32,
}

fn confirm_many(args: Count, _env: Env) -> Result<Value, ToolError> {
    let (mut yes, mut no) = (0u32, 0u32);
    let mut errors: BTreeMap<&'static str, u32> = BTreeMap::new();
    let mut first_error = None;
    for n in 0..args.count {
        match interaction::confirm(&format!("Step {n}?")) {
            Ok(true) => yes += 1,
            Ok(false) => no += 1,
            Err(error) => {
                let (kind, message) = kind(&error);
                *errors.entry(kind).or_default() += 1;
                first_error.get_or_insert(message);
            }
        }
    }
    Ok(json!({"yes": yes, "no": no, "errors": errors, "first_error": first_error}))
}

#[derive(serde::Deserialize)]
struct Bytes {
    bytes: usize,
}

fn huge_schema(args: Bytes, _env: Env) -> Result<Value, ToolError> {
    let head = r#"{"type":"object","properties":{},"description":""#;
    let tail = r#""}"#;
    let mut schema = String::with_capacity(args.bytes.max(head.len() + tail.len()));
    schema.push_str(head);
    while schema.len() + tail.len() < args.bytes {
        schema.push('x');
    }
    schema.push_str(tail);
    Ok(match interaction::ask_text("Fill this in.", &schema) {
        Ok(answer) => json!({"answer": answer}),
        Err(error) => {
            let (kind, message) = kind(&error);
            json!({"error": kind, "message": message})
        }
    })
}

fn confirm_once(_: Value, _env: Env) -> Result<Value, ToolError> {
    Ok(match interaction::confirm("Proceed?") {
        Ok(answer) => json!({"answer": answer}),
        Err(error) => {
            let (kind, message) = kind(&error);
            json!({"error": kind, "message": message})
        }
    })
}

fn sample_many(args: Count, _env: Env) -> Result<Value, ToolError> {
    let mut answered = 0u32;
    let mut errors: BTreeMap<&'static str, u32> = BTreeMap::new();
    let mut first_error = None;
    for n in 0..args.count {
        match sampling::create_message(Request::new(vec![Message::user(format!("Step {n}"))], 10)) {
            Ok(_) => answered += 1,
            Err(error) => {
                let (kind, message) = kind(&error);
                *errors.entry(kind).or_default() += 1;
                first_error.get_or_insert(message);
            }
        }
    }
    Ok(json!({"answered": answered, "errors": errors, "first_error": first_error}))
}

/// One request's outcome as JSON.
fn outcome(request: Request) -> Value {
    match sampling::create_message(request) {
        Ok(answer) => json!({
            "role": match answer.role { Role::User => "user", _ => "assistant" },
            "text": match &answer.content { SamplingContent::Text(text) => Value::from(text.as_str()), _ => Value::Null },
            "model": answer.model,
            "stop_reason": answer.stop_reason,
        }),
        Err(error) => {
            let (kind, message) = kind(&error);
            json!({"error": kind, "message": message})
        }
    }
}

#[derive(serde::Deserialize)]
struct Tokens {
    max_tokens: u32,
}

fn sample_tokens(args: Tokens, _env: Env) -> Result<Value, ToolError> {
    Ok(outcome(Request::new(vec![Message::user("Hi")], args.max_tokens)))
}

fn sample_huge(args: Bytes, _env: Env) -> Result<Value, ToolError> {
    Ok(outcome(Request::new(vec![Message::user("x".repeat(args.bytes))], 10)))
}

fn sample_once(_: Value, _env: Env) -> Result<Value, ToolError> {
    Ok(outcome(Request::new(vec![Message::user("Say hi")], 10)))
}

fn tools() -> Vec<Tool> {
    let none = schema::object(Vec::<(String, Value)>::new(), Vec::<String>::new());
    vec![
        Tool::new(
            "ask_confirm_many",
            "Asks many confirmations in one call.",
            schema::object([("count", schema::integer("How many."))], ["count"]),
            confirm_many,
        ),
        Tool::new(
            "ask_huge_schema",
            "Asks with a huge schema.",
            schema::object([("bytes", schema::integer("Schema size."))], ["bytes"]),
            huge_schema,
        ),
        Tool::new("ask_confirm_once", "Asks once.", none.clone(), confirm_once),
        Tool::new(
            "sample_many",
            "Sends many sampling requests in one call.",
            schema::object([("count", schema::integer("How many."))], ["count"]),
            sample_many,
        ),
        Tool::new(
            "sample_tokens",
            "Sends one sampling request asking for many tokens.",
            schema::object([("max_tokens", schema::integer("Tokens."))], ["max_tokens"]),
            sample_tokens,
        ),
        Tool::new(
            "sample_huge",
            "Sends one sampling request with a huge message.",
            schema::object([("bytes", schema::integer("Message size."))], ["bytes"]),
            sample_huge,
        ),
        Tool::new("sample_once", "Sends one sampling request.", none, sample_once),
    ]
}

export_plugin!(tools);
