//! The prompts of the registry's catalog ([`toolhost::catalog`]) as MCP serves them.
//!
//! A server declares the `prompts` capability (with `listChanged` when it tells clients
//! of changes, hot reload) when the catalog has prompts or may gain some (hot reload),
//! and then answers:
//!
//! - `prompts/list`: every prompt, by owner in registration order, in pages of the
//!   server's page size with an opaque `nextCursor` (a `tools/list` cursor is refused,
//!   and the other way round); in the 2026-07-28 era with `ttlMs` and `cacheScope:
//!   "public"` as `tools/list` has them.
//! - `prompts/get`: `name` (a string) and `arguments` (an object of strings, or left
//!   out); refused with `-32602` for an unknown prompt, a missing required argument
//!   (named) or a value that is not a string; the source runs under the registry's call
//!   timeout and is stopped by `notifications/cancelled`. Its failure (or time-out) is
//!   `-32603` with its message, as the spec has it for internal errors. The result is
//!   `{description?, messages: [{role, content}]}`, each content block as MCP encodes
//!   it ([`content_block_json`](crate::content::content_block_json); a block the
//!   client's revision has no type for, as text saying what it was); one carrying more
//!   than [`MAX_CATALOG_RESULT_BYTES`] is refused (`-32603`) before it is encoded.
//! - `completion/complete` with `ref/prompt`: the source's values for the argument
//!   ([`PromptSource::complete`](toolhost::catalog::PromptSource::complete)), at most
//!   [`MAX_COMPLETIONS`] with `hasMore` and `total`.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use std::sync::Arc;

use toolhost::catalog::{Catalog, PromptDefinition, PromptResult, PromptSource, Role};

use crate::content::content_block_json_for;
use crate::jsonrpc::{raw_type_name, Params, RequestId, RpcError, INVALID_PARAMS};
use crate::limits::MAX_CATALOG_RESULT_BYTES;
use crate::pagination::{page, Cursor, CursorError};
use crate::resources::MAX_COMPLETIONS;
use crate::revision::Revision;

/// What a `prompts/list` cursor starts with, before the tools' cursor scheme: a cursor
/// of one list is refused by the other.
const CURSOR_PREFIX: &str = "p";
/// The longest prompt argument value or name a request may carry in a completion.
const MAX_COMPLETION_VALUE: usize = 4096;

fn invalid(id: &RequestId, message: impl std::fmt::Display) -> RpcError {
    RpcError::new(
        id.clone(),
        INVALID_PARAMS,
        format!("Invalid params: {message}"),
    )
}

/// The `cursor` param: `None` when absent or null.
pub(crate) fn cursor_param(id: &RequestId, params: &Params) -> Result<Option<String>, RpcError> {
    match params.raw("cursor") {
        None => Ok(None),
        Some(raw) if raw_type_name(raw) == "null" => Ok(None),
        Some(raw) => params.str("cursor").map(Some).ok_or_else(|| {
            invalid(
                id,
                format!(
                    "\"cursor\" must be a string (the nextCursor of the last page), got {}",
                    raw_type_name(raw)
                ),
            )
        }),
    }
}

/// A prompt definition as `prompts/list` gives it.
fn prompt_json(definition: &PromptDefinition) -> Value {
    let mut out = json!({ "name": definition.name });
    if let Some(title) = &definition.title {
        out["title"] = json!(title);
    }
    if let Some(description) = &definition.description {
        out["description"] = json!(description);
    }
    let arguments: Vec<Value> = definition
        .arguments
        .iter()
        .map(|argument| {
            let mut out = json!({ "name": argument.name, "required": argument.required });
            if let Some(description) = &argument.description {
                out["description"] = json!(description);
            }
            out
        })
        .collect();
    out["arguments"] = Value::Array(arguments);
    out
}

/// The `prompts/list` page `params` asks for (before the era's fields).
pub(crate) fn list(
    id: &RequestId,
    params: &Params,
    catalog: &Catalog,
    page_size: usize,
) -> Result<Value, RpcError> {
    let cursor = match cursor_param(id, params)? {
        None => None,
        Some(text) => match text.strip_prefix(CURSOR_PREFIX) {
            Some(inner) => Some(Cursor::parse(inner)),
            None => {
                return Err(RpcError::new(
                    id.clone(),
                    INVALID_PARAMS,
                    CursorError::Unknown.to_string(),
                ))
            }
        },
    };
    let prompts = catalog.prompts();
    let names: Vec<String> = prompts.iter().map(|p| p.name.clone()).collect();
    let page = page(&names, cursor.as_ref(), page_size).map_err(|err| match err {
        CursorError::Stale(name) => invalid(
            id,
            format!("the prompt list changed since this cursor was given (prompt \"{name}\" is gone); list again from the start without a cursor"),
        ),
        other => RpcError::new(id.clone(), INVALID_PARAMS, other.to_string()),
    })?;
    let mut result = json!({
        "prompts": prompts[page.range].iter().map(prompt_json).collect::<Vec<_>>(),
    });
    if let Some(next) = page.next {
        result["nextCursor"] = json!(format!("{CURSOR_PREFIX}{}", next.as_str()));
    }
    Ok(result)
}

/// A checked `prompts/get`: the prompt and the arguments to fill it with.
#[derive(Debug)]
pub(crate) struct GetRequest {
    /// The prompt's name.
    pub(crate) name: String,
    /// Its arguments, every required one there.
    pub(crate) arguments: BTreeMap<String, String>,
}

/// Reads an object of strings (`what` names it in errors); `None` when absent or null.
fn string_map(
    id: &RequestId,
    value: Option<Value>,
    what: &str,
) -> Result<BTreeMap<String, String>, RpcError> {
    match value {
        None | Some(Value::Null) => Ok(BTreeMap::new()),
        Some(Value::Object(fields)) => fields
            .into_iter()
            .map(|(key, value)| match value {
                Value::String(text) => Ok((key, text)),
                other => Err(invalid(
                    id,
                    format!(
                        "{what} \"{key}\" must be a string, got {}",
                        value_type(&other)
                    ),
                )),
            })
            .collect(),
        Some(other) => Err(invalid(
            id,
            format!(
                "{what}s must be an object of strings such as {{\"topic\": \"rust\"}}, got {}",
                value_type(&other)
            ),
        )),
    }
}

fn value_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The prompt `name` names with its source, or the `-32602` saying there is none.
fn named_prompt(
    id: &RequestId,
    catalog: &Catalog,
    name: Option<String>,
    what: &str,
) -> Result<(PromptDefinition, Arc<dyn PromptSource>), RpcError> {
    let Some(name) = name else {
        return Err(invalid(
            id,
            format!("{what} must be a string: the name of a prompt prompts/list gives"),
        ));
    };
    catalog.prompt(&name).ok_or_else(|| {
        invalid(
            id,
            format!(
                "unknown prompt \"{}\"; prompts/list gives the prompts there are",
                name.chars().take(128).collect::<String>()
            ),
        )
    })
}

/// Checks `prompts/get`'s params against the catalog: the request and the prompt's
/// source.
pub(crate) fn get_request(
    id: &RequestId,
    params: &Params,
    catalog: &Catalog,
) -> Result<(GetRequest, Arc<dyn PromptSource>), RpcError> {
    let (definition, source) = named_prompt(id, catalog, params.str("name"), "\"name\"")?;
    let arguments = string_map(id, params.value("arguments"), "argument")?;
    if let Some(missing) = definition
        .arguments
        .iter()
        .find(|argument| argument.required && !arguments.contains_key(&argument.name))
    {
        return Err(invalid(
            id,
            format!(
                "prompt \"{}\" needs argument \"{}\"; send it in \"arguments\"",
                definition.name, missing.name
            ),
        ));
    }
    Ok((
        GetRequest {
            name: definition.name,
            arguments,
        },
        source,
    ))
}

/// The bytes a prompt result carries (text, and binary as base64), for the cap.
fn result_bytes(result: &PromptResult) -> usize {
    result.description.as_ref().map_or(0, String::len)
        + result
            .messages
            .iter()
            .map(|message| message.content.payload_len())
            .fold(0usize, usize::saturating_add)
}

/// A source's prompt result as `prompts/get` gives it, or the message of its refusal
/// when it carries more than [`MAX_CATALOG_RESULT_BYTES`].
pub(crate) fn get_result(
    name: &str,
    result: &PromptResult,
    revision: Revision,
) -> Result<Value, String> {
    let size = result_bytes(result);
    if size > MAX_CATALOG_RESULT_BYTES {
        return Err(format!(
            "prompt \"{name}\" gave a result of {size} bytes, over the {MAX_CATALOG_RESULT_BYTES}-byte cap for a prompt; ask its author for a smaller one"
        ));
    }
    let messages: Vec<Value> = result
        .messages
        .iter()
        .map(|message| {
            let role = match message.role {
                Role::User => "user",
                Role::Assistant => "assistant",
            };
            json!({ "role": role, "content": content_block_json_for(&message.content, revision) })
        })
        .collect();
    let mut out = json!({ "messages": messages });
    if let Some(description) = &result.description {
        out["description"] = json!(description);
    }
    Ok(out)
}

/// A checked `completion/complete` of a prompt's argument.
#[derive(Debug)]
pub(crate) struct CompleteRequest {
    /// The prompt's name.
    pub(crate) name: String,
    /// The argument to complete.
    pub(crate) argument: String,
    /// What the client has typed so far.
    pub(crate) value: String,
    /// The arguments already filled in.
    pub(crate) context: BTreeMap<String, String>,
}

/// Checks a `completion/complete` whose `ref` is a `ref/prompt`: the request and the
/// prompt's source.
pub(crate) fn complete_request(
    id: &RequestId,
    params: &Params,
    catalog: &Catalog,
) -> Result<(CompleteRequest, Arc<dyn PromptSource>), RpcError> {
    let reference = params.value("ref");
    let name = reference
        .as_ref()
        .and_then(|r| r.get("name"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    let (definition, source) = named_prompt(id, catalog, name, "ref.name")?;
    let argument = params.value("argument");
    let field = |key: &str| {
        argument
            .as_ref()
            .and_then(|a| a.get(key))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    let (Some(argument), Some(value)) = (field("name"), field("value")) else {
        return Err(invalid(
            id,
            "\"argument\" must be {\"name\": ARGUMENT, \"value\": PREFIX}, both strings",
        ));
    };
    if !definition.arguments.iter().any(|a| a.name == argument) {
        let names: Vec<&str> = definition
            .arguments
            .iter()
            .map(|a| a.name.as_str())
            .collect();
        return Err(invalid(
            id,
            format!(
                "prompt \"{}\" has no argument \"{}\"; its arguments are [{}]",
                definition.name,
                argument.chars().take(128).collect::<String>(),
                names.join(", ")
            ),
        ));
    }
    if value.len() > MAX_COMPLETION_VALUE {
        return Err(invalid(
            id,
            format!(
                "argument.value is {} bytes, over the {MAX_COMPLETION_VALUE}-byte limit; send the start of a value",
                value.len()
            ),
        ));
    }
    let context = string_map(
        id,
        params
            .value("context")
            .and_then(|c| c.get("arguments").cloned()),
        "context argument",
    )?;
    Ok((
        CompleteRequest {
            name: definition.name,
            argument,
            value,
            context,
        },
        source,
    ))
}

/// The `completion/complete` result for a source's `values`: at most
/// [`MAX_COMPLETIONS`], with `hasMore` and the `total` the source gave.
pub(crate) fn complete_result(mut values: Vec<String>) -> Value {
    let total = values.len();
    values.truncate(MAX_COMPLETIONS);
    // The values travel in one answer: keep them within the catalog's cap as well.
    let mut bytes = 0usize;
    let fit = values
        .iter()
        .take_while(|value| {
            bytes = bytes.saturating_add(value.len());
            bytes <= MAX_CATALOG_RESULT_BYTES
        })
        .count();
    values.truncate(fit);
    json!({ "completion": {
        "values": values,
        "total": total,
        "hasMore": total > fit,
    } })
}
