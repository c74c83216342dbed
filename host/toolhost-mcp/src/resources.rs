//! The files under the server's storage root as MCP resources ([`FileResources`]).
//!
//! A server given a [`FileResources`] ([`McpServer::with_resources`](crate::McpServer::with_resources),
//! or `http::Registries::shared_with_files` / `http::Registries::per_session_root_with_files`
//! over HTTP) declares the `resources` and `completions` capabilities and answers:
//!
//! - `resources/list`: the files `list_files` shows (the same walk, under the same
//!   policy: hidden paths and other extensions stay out), in path order, as
//!   `file:///PATH` URIs (PATH relative to the root, percent-encoded but for
//!   `A-Z a-z 0-9 - . _ ~ /`), each with its `name` (the path), `mimeType` (from the
//!   extension, as [`content_type_for`] gives it) and `size`; in pages of the
//!   server's page size ([`DEFAULT_PAGE_SIZE`](crate::limits::DEFAULT_PAGE_SIZE)) with
//!   an opaque `nextCursor` (of the same scheme as `tools/list`'s, marked as a resource
//!   cursor: one of the other kind is refused). A page holds only its own entries; the
//!   walk is one of the file tools' walks, under their walk budget.
//! - `resources/read` of a `file:///PATH` URI: its content as `text` when it is UTF-8
//!   without NUL bytes, else as `blob` (base64), with its `mimeType`. Refused with
//!   `-32602` (the message says what was wrong and what to send): a URI of another
//!   form, one longer than [`MAX_URI_BYTES`], a bad or non-UTF-8 percent-encoding, a path
//!   the policy or the storage refuses (`..`, absolute, hidden, another extension, a
//!   symlink), a directory, a file over the read cap (the file tools' `max_read_bytes`,
//!   `--max-read-bytes`: the size is checked before anything is read). A missing file is
//!   `-32002` ([`RESOURCE_NOT_FOUND`]) with the URI in `data`.
//! - `resources/templates/list`: one template, [`FILE_TEMPLATE`].
//! - In the 2026-07-28 era a list or a read also says `ttlMs: 0` and `cacheScope:
//!   "private"` (the files change at any time and are one root's), the template list
//!   `cacheScope: "public"` with the tools' static `ttlMs`.
//! - `completion/complete` for the template's `path` argument: up to
//!   [`MAX_COMPLETIONS`] listed paths starting with the value given, with `hasMore` (and
//!   `total` when all were counted); the walk stops at the first path past the matches
//!   or once one more than the cap matched.
//!
//! A server without one declares neither capability and answers the methods
//! `-32601`, as before.
//!
//! ```
//! use std::sync::Arc;
//! use toolhost::registry::Registry;
//! use toolhost::tools::VfsToolOptions;
//! use toolhost::vfs::{MemoryStorage, Storage};
//! use toolhost_mcp::{FileResources, McpServer};
//!
//! let storage = Arc::new(MemoryStorage::new());
//! storage.write("notes/todo.md", b"- ship it\n", "")?;
//! storage.write(".env", b"SECRET=1\n", "")?;
//! let options = VfsToolOptions::builder(storage).hide_hidden_paths(true).build();
//! let server = McpServer::new(Arc::new(Registry::new()))
//!     .with_resources(FileResources::new(options));
//! let input = concat!(
//!     r#"{"jsonrpc":"2.0","id":1,"method":"resources/list"}"#, "\n",
//!     r#"{"jsonrpc":"2.0","id":2,"method":"resources/read","params":{"uri":"file:///notes/todo.md"}}"#, "\n",
//! );
//! let mut output = Vec::new();
//! # tokio::runtime::Runtime::new()?.block_on(async {
//! server.serve(input.as_bytes(), &mut output).await?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # })?;
//! // Resource requests run concurrently, as tool calls do: answers come as they finish.
//! let mut lines: Vec<&str> = std::str::from_utf8(&output)?.lines().collect();
//! lines.sort();
//! assert_eq!(lines, [
//!     r#"{"id":1,"jsonrpc":"2.0","result":{"resources":[{"mimeType":"text/markdown","name":"notes/todo.md","size":10,"uri":"file:///notes/todo.md"}]}}"#,
//!     r#"{"id":2,"jsonrpc":"2.0","result":{"contents":[{"mimeType":"text/markdown","text":"- ship it\n","uri":"file:///notes/todo.md"}]}}"#,
//! ]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::ops::ControlFlow;
use std::sync::Arc;

use base64::Engine as _;
use serde_json::{json, Value};

use toolhost::registry::ToolError;
use toolhost::tools::list_files::visit_listed_files;
use toolhost::tools::VfsToolOptions;
use toolhost::vfs::{content_type_for, StorageError, MAX_PATH_LEN};

use crate::jsonrpc::{raw_type_name, Params, RequestId, RpcError, INVALID_PARAMS};
use crate::pagination::{resume_after, Cursor};

/// The JSON-RPC code of a `resources/read` of a file that does not exist (MCP's
/// resource-not-found); its `data` carries the `uri`.
pub const RESOURCE_NOT_FOUND: i64 = -32002;
/// JSON-RPC's internal error: a storage failure or a busy walk budget.
const INTERNAL_ERROR: i64 = -32603;

/// What every resource URI of this server starts with.
pub const FILE_URI_PREFIX: &str = "file:///";
/// The one resource template: any file under the root by its path.
pub const FILE_TEMPLATE: &str = "file:///{path}";
/// The longest URI read: [`FILE_URI_PREFIX`] and a path of
/// [`MAX_PATH_LEN`] bytes, each percent-encoded (3 bytes per byte): 3,080 bytes. A
/// longer one names no file and is refused before it is decoded.
pub const MAX_URI_BYTES: usize = FILE_URI_PREFIX.len() + 3 * MAX_PATH_LEN;
/// The most paths one `completion/complete` answers: 100 (MCP's own cap).
pub const MAX_COMPLETIONS: usize = 100;

/// The name the walks of resources give in the walk budget's busy error.
const WALKER: &str = "resources/list";
/// How many characters of a client's URI an error message shows.
const SHOWN_CHARS: usize = 120;

/// The files under a storage root, offered as MCP resources: the storage, policy, read
/// cap and walk budget of the built-in file tools ([`VfsToolOptions`]), so a client sees
/// through resources exactly the files the model sees through the tools. See the
/// [module docs](self) for what it answers.
#[derive(Clone)]
pub struct FileResources {
    options: Arc<VfsToolOptions>,
}

impl std::fmt::Debug for FileResources {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileResources")
            .field("policy", &self.options.policy())
            .field("max_read_bytes", &self.options.max_read_bytes())
            .finish_non_exhaustive()
    }
}

impl FileResources {
    /// The files of `options`' storage, under its policy (hidden paths, extensions),
    /// read cap ([`VfsToolOptions::max_read_bytes`]) and walk budget: pass the options
    /// the file tools were registered with.
    pub fn new(options: VfsToolOptions) -> Self {
        Self {
            options: Arc::new(options),
        }
    }

    /// The options it reads the files under.
    pub fn options(&self) -> &VfsToolOptions {
        &self.options
    }
}

/// A resource request whose params were checked, to be run off the reading task.
#[derive(Debug)]
pub(crate) enum ResourceRequest {
    /// `resources/list` after `after` (how many files were listed before, and the path
    /// of the last; `None`: the first page), at most `page_size` files.
    List {
        after: Option<(usize, String)>,
        page_size: usize,
    },
    /// `resources/read` of the file at this (checked) path, named by `uri`.
    Read { uri: String, path: String },
    /// `completion/complete` of paths starting with `prefix`.
    Complete { prefix: String },
}

impl ResourceRequest {
    /// The method it answers (for logs).
    pub(crate) fn method(&self) -> &'static str {
        match self {
            Self::List { .. } => "resources/list",
            Self::Read { .. } => "resources/read",
            Self::Complete { .. } => "completion/complete",
        }
    }

    /// The bytes it holds while it waits (for the in-flight byte budget).
    pub(crate) fn held_bytes(&self) -> usize {
        match self {
            Self::List { after, .. } => after.as_ref().map_or(0, |(_, path)| path.len()),
            Self::Read { uri, path } => uri.len() + path.len(),
            Self::Complete { prefix } => prefix.len(),
        }
    }
}

fn invalid(id: &RequestId, message: String) -> RpcError {
    RpcError::new(
        id.clone(),
        INVALID_PARAMS,
        format!("Invalid params: {message}"),
    )
}

/// A client's text as a message shows it: control characters escaped, at most
/// [`SHOWN_CHARS`] characters.
pub(crate) fn shown(text: &str) -> String {
    let mut out = String::new();
    for (count, c) in text.chars().enumerate() {
        if count == SHOWN_CHARS {
            out.push_str(&format!("...({} bytes in all)", text.len()));
            break;
        }
        if c.is_control() || c == '"' || c == '\\' {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// The required string member `name` of `params`.
fn required_str(
    id: &RequestId,
    params: &Params,
    name: &str,
    what: &str,
) -> Result<String, RpcError> {
    match params.raw(name) {
        None => Err(invalid(id, format!("\"{name}\" is required: {what}"))),
        Some(raw) => params.str(name).ok_or_else(|| {
            invalid(
                id,
                format!(
                    "\"{name}\" must be a string ({what}), got {}",
                    raw_type_name(raw)
                ),
            )
        }),
    }
}

/// The `resources/templates/list` result (before the era's fields).
pub(crate) fn templates_result() -> Value {
    json!({ "resourceTemplates": [{
        "uriTemplate": FILE_TEMPLATE,
        "name": "file",
        "title": "File under the root",
        "description": "A file under the server's storage root, by its path relative to the root (e.g. notes/todo.md); completion/complete suggests paths.",
    }] })
}

/// Adds what 2026-07-28 requires of a `method` result besides `resultType` and `_meta`:
/// cache hints. The files change at any time (the model writes them) and are one root's
/// (a session's, a client's): a list or a read says `ttlMs: 0` and `cacheScope:
/// "private"`. The template is the same for every client and never changes while the
/// server runs. A completion carries none.
pub(crate) fn add_cache_hints(method: &str, result: &mut Value) {
    let (ttl_ms, scope) = match method {
        "resources/list" | "resources/read" => (0, "private"),
        "resources/templates/list" => (crate::protocol::STATIC_TTL_MS, "public"),
        _ => return,
    };
    if let Value::Object(fields) = result {
        fields.insert("ttlMs".into(), json!(ttl_ms));
        fields.insert("cacheScope".into(), json!(scope));
    }
}

impl FileResources {
    /// Checks a resource method's params: the request to run, or the error to answer.
    pub(crate) fn request(
        &self,
        id: &RequestId,
        method: &str,
        params: &Params,
        page_size: usize,
    ) -> Result<ResourceRequest, RpcError> {
        match method {
            "resources/list" => {
                let after = match params.raw("cursor") {
                    None => None,
                    Some(raw) if raw_type_name(raw) == "null" => None,
                    Some(raw) => match params.str("cursor") {
                        Some(text) => Some(
                            resume_after(&Cursor::parse(&text))
                                .map_err(|err| RpcError::new(id.clone(), INVALID_PARAMS, err.to_string()))?,
                        ),
                        None => {
                            return Err(invalid(
                                id,
                                format!(
                                    "\"cursor\" must be a string (the nextCursor of the last page), got {}",
                                    raw_type_name(raw)
                                ),
                            ))
                        }
                    },
                };
                Ok(ResourceRequest::List {
                    after,
                    page_size: page_size.max(1),
                })
            }
            "resources/read" => {
                let uri = required_str(
                    id,
                    params,
                    "uri",
                    "a resource URI such as file:///notes/todo.md",
                )?;
                let path = self.path_of(&uri).map_err(|message| invalid(id, message))?;
                Ok(ResourceRequest::Read { uri, path })
            }
            _ => Self::completion(id, params),
        }
    }

    /// Checks `completion/complete`: a reference to [`FILE_TEMPLATE`] and its `path`
    /// argument.
    fn completion(id: &RequestId, params: &Params) -> Result<ResourceRequest, RpcError> {
        let reference = params.value("ref");
        let kind = reference
            .as_ref()
            .and_then(|r| r.get("type"))
            .and_then(Value::as_str);
        match kind {
            Some("ref/resource") => {}
            Some("ref/prompt") => {
                return Err(invalid(
                    id,
                    "this server has no prompts to complete; complete the resource template with ref {\"type\": \"ref/resource\", \"uri\": \"file:///{path}\"}".into(),
                ))
            }
            _ => {
                return Err(invalid(
                    id,
                    "\"ref\" must be {\"type\": \"ref/resource\", \"uri\": \"file:///{path}\"}, the template whose argument to complete".into(),
                ))
            }
        }
        let uri = reference
            .as_ref()
            .and_then(|r| r.get("uri"))
            .and_then(Value::as_str);
        if uri != Some(FILE_TEMPLATE) {
            return Err(invalid(
                id,
                format!(
                    "ref.uri must be the template {FILE_TEMPLATE} (the one resources/templates/list gives), got \"{}\"",
                    shown(uri.unwrap_or_default())
                ),
            ));
        }
        let argument = params.value("argument");
        let name = argument
            .as_ref()
            .and_then(|a| a.get("name"))
            .and_then(Value::as_str);
        if name != Some("path") {
            return Err(invalid(
                id,
                "\"argument\" must be {\"name\": \"path\", \"value\": PREFIX}: the template's one argument is path".into(),
            ));
        }
        let Some(prefix) = argument
            .as_ref()
            .and_then(|a| a.get("value"))
            .and_then(Value::as_str)
        else {
            return Err(invalid(
                id,
                "argument.value must be a string: the start of the path to complete (\"\" for any)"
                    .into(),
            ));
        };
        if prefix.len() > MAX_PATH_LEN {
            return Err(invalid(
                id,
                format!(
                    "argument.value is {} bytes, longer than any path ({MAX_PATH_LEN} bytes at most); send the start of a path",
                    prefix.len()
                ),
            ));
        }
        Ok(ResourceRequest::Complete {
            prefix: prefix.to_owned(),
        })
    }

    /// The path a `file:///PATH` URI names, checked against the path rules and the
    /// policy; the message for the client's `-32602` when it names none.
    pub(crate) fn path_of(&self, uri: &str) -> Result<String, String> {
        if uri.len() > MAX_URI_BYTES {
            return Err(format!(
                "the uri is {} bytes, over the {MAX_URI_BYTES}-byte limit (no path is that long); name a file under the root as file:///PATH",
                uri.len()
            ));
        }
        let Some(encoded) = uri.strip_prefix(FILE_URI_PREFIX) else {
            return Err(format!(
                "\"{}\" is not a file:/// URI; this server's resources are the files under its root, named file:///PATH with PATH relative to the root (e.g. file:///notes/todo.md), as resources/list gives them",
                shown(uri)
            ));
        };
        if encoded.contains(['?', '#']) {
            return Err(format!(
                "\"{}\" has a query or fragment; a file:/// URI names a file only (percent-encode ? as %3F and # as %23 in a path)",
                shown(uri)
            ));
        }
        let path = percent_decode(encoded).map_err(|what| format!("\"{}\" {what}", shown(uri)))?;
        self.options
            .policy()
            .check("uri", &path)
            .map_err(|err| format!("{err} (the uri's path, decoded from \"{}\")", shown(uri)))?;
        Ok(path)
    }

    /// Runs a checked request: its result (before the era's fields), or its error.
    pub(crate) async fn run(
        &self,
        id: &RequestId,
        request: ResourceRequest,
    ) -> Result<Value, RpcError> {
        match request {
            ResourceRequest::List { after, page_size } => self.list(id, after, page_size).await,
            ResourceRequest::Read { uri, path } => self.read(id, uri, path).await,
            ResourceRequest::Complete { prefix } => self.complete(id, prefix).await,
        }
    }

    async fn list(
        &self,
        id: &RequestId,
        after: Option<(usize, String)>,
        page_size: usize,
    ) -> Result<Value, RpcError> {
        let (listed, previous) = after.map_or((0, None), |(listed, path)| (listed, Some(path)));
        let page = visit_listed_files(
            &self.options,
            WALKER,
            (Vec::new(), false),
            move |(page, more): &mut (Vec<Value>, bool), file| {
                // The walk is in path order: the cursor's path and those before it were
                // listed (or were not there then).
                if previous
                    .as_ref()
                    .is_some_and(|previous| file.path <= *previous)
                {
                    return ControlFlow::Continue(());
                }
                if page.len() == page_size {
                    *more = true;
                    return ControlFlow::Break(());
                }
                page.push(json!({
                    "uri": file_uri(&file.path),
                    "name": file.path,
                    "mimeType": content_type_for(&file.path),
                    "size": file.size,
                }));
                ControlFlow::Continue(())
            },
        )
        .await
        .map_err(|err| walk_error(id, &err))?;
        let (resources, more) = page;
        let mut result = json!({});
        if more {
            let last = resources
                .last()
                .and_then(|resource| resource["name"].as_str())
                .unwrap_or_default();
            let next = Cursor::for_resources(listed + resources.len(), last);
            result["nextCursor"] = json!(next.as_str());
        }
        result["resources"] = Value::Array(resources);
        Ok(result)
    }

    async fn read(&self, id: &RequestId, uri: String, path: String) -> Result<Value, RpcError> {
        let storage = Arc::clone(self.options.storage());
        let cap = self.options.max_read_bytes();
        let read = tokio::task::spawn_blocking(move || storage.read_capped(&path, cap))
            .await
            .map_err(|err| {
                RpcError::new(
                    id.clone(),
                    INTERNAL_ERROR,
                    format!("Internal error: the read was stopped: {err}"),
                )
            })?;
        let file = match read {
            Ok(file) => file,
            Err(err) => return Err(read_error(id, &uri, err)),
        };
        let mut content = json!({ "uri": uri, "mimeType": file.content_type });
        let (key, value) = match String::from_utf8(file.content) {
            Ok(text) if !text.contains('\0') => ("text", text),
            Ok(text) => (
                "blob",
                base64::engine::general_purpose::STANDARD.encode(text),
            ),
            Err(err) => (
                "blob",
                base64::engine::general_purpose::STANDARD.encode(err.as_bytes()),
            ),
        };
        content[key] = json!(value);
        Ok(json!({ "contents": [content] }))
    }

    async fn complete(&self, id: &RequestId, prefix: String) -> Result<Value, RpcError> {
        let (values, more) = visit_listed_files(
            &self.options,
            WALKER,
            (Vec::new(), false),
            move |(values, more): &mut (Vec<String>, bool), file| {
                if file.path.starts_with(&prefix) {
                    if values.len() == MAX_COMPLETIONS {
                        *more = true;
                        return ControlFlow::Break(());
                    }
                    values.push(file.path);
                } else if file.path > prefix {
                    // In path order, the paths with the prefix are together: past them.
                    return ControlFlow::Break(());
                }
                ControlFlow::Continue(())
            },
        )
        .await
        .map_err(|err| walk_error(id, &err))?;
        let mut completion = json!({ "values": values, "hasMore": more });
        if !more {
            completion["total"] = json!(completion["values"].as_array().map_or(0, Vec::len));
        }
        Ok(json!({ "completion": completion }))
    }
}

/// The `file:///` URI of a stored path: every byte but `A-Z a-z 0-9 - . _ ~ /`
/// percent-encoded.
pub(crate) fn file_uri(path: &str) -> String {
    let mut uri = String::with_capacity(FILE_URI_PREFIX.len() + path.len());
    uri.push_str(FILE_URI_PREFIX);
    for byte in path.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~/".contains(&byte) {
            uri.push(char::from(byte));
        } else {
            uri.push_str(&format!("%{byte:02X}"));
        }
    }
    uri
}

/// Decodes `%XX` escapes; what is wrong (for "URI ...") when one is malformed or the
/// bytes are not UTF-8.
fn percent_decode(encoded: &str) -> Result<String, &'static str> {
    let bytes = encoded.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while let Some(&byte) = bytes.get(at) {
        if byte == b'%' {
            let hex = bytes
                .get(at + 1..at + 3)
                .and_then(|hex| std::str::from_utf8(hex).ok())
                .and_then(|hex| u8::from_str_radix(hex, 16).ok())
                .ok_or(
                    "has a % not followed by two hex digits; percent-encode a literal % as %25",
                )?;
            out.push(hex);
            at += 3;
        } else {
            out.push(byte);
            at += 1;
        }
    }
    String::from_utf8(out).map_err(|_| {
        "decodes to bytes that are not UTF-8; paths are UTF-8 text, percent-encoded as resources/list gives them"
    })
}

/// The error of a walk that could not run or failed.
fn walk_error(id: &RequestId, err: &ToolError) -> RpcError {
    RpcError::new(id.clone(), INTERNAL_ERROR, format!("Internal error: {err}"))
}

/// The error of a read the storage refused.
fn read_error(id: &RequestId, uri: &str, err: StorageError) -> RpcError {
    let uri_shown = shown(uri);
    match err {
        StorageError::NotFound { .. } => RpcError::new(
            id.clone(),
            RESOURCE_NOT_FOUND,
            format!("Resource not found: no file at \"{uri_shown}\"; resources/list gives the files there are"),
        )
        .with_data(json!({ "uri": uri })),
        StorageError::FileTooLarge { size, limit, .. } => invalid(
            id,
            format!(
                "\"{uri_shown}\" is {size} bytes, over the {limit}-byte read cap (--max-read-bytes); read a smaller file, or raise the cap when starting the server"
            ),
        ),
        StorageError::IsDirectory { .. } => invalid(
            id,
            format!("\"{uri_shown}\" is a directory; read a file under it (resources/list gives them)"),
        ),
        StorageError::Io { .. } | StorageError::Unsupported { .. } => {
            RpcError::new(id.clone(), INTERNAL_ERROR, format!("Internal error: {err}"))
        }
        // Denied (a symlink), an invalid path, and the rest: the storage's own message.
        other => invalid(id, format!("{other} (reading \"{uri_shown}\")")),
    }
}

pub(crate) mod catalog;
pub(crate) mod subscribe;

#[cfg(test)]
pub(crate) mod tests;
