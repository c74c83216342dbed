//! A Model Context Protocol server: the registry's tools, offered to any MCP client
//! (desktop assistants, agent frameworks, hosted agents) with no glue, over two
//! transports that share one core.
//!
//! - **stdio** ([`McpServer`], always built): JSON-RPC 2.0, one message per line, over
//!   any async reader and writer; what a desktop client starts as a child process.
//! - **Streamable HTTP** (`http`, behind the cargo feature `http`): sessions, bearer
//!   tokens and the Host/Origin checks (docs/deploy.md). `http::McpService` is the
//!   endpoint as a `tower` service an application mounts on a route of its own next
//!   to its own routes (see the `axum_mount` example); `http::HttpServer` serves it on
//!   a listener of its own, with the protections that belong to the connections.
//!   Without the feature the crate builds no HTTP stack.
//!
//! The rest of this page is the protocol both transports speak. The server speaks both eras of
//! MCP ([`Revision`]): the legacy one, opened by `initialize` (echoing the client's
//! version when it is a legacy one of [`SUPPORTED_PROTOCOL_VERSIONS`], else 2025-11-25),
//! and the modern 2026-07-28, where each request carries its version in `params._meta`
//! and the client may ask `server/discover` first (docs/protocol.md). It answers `initialize`,
//! `ping`, `logging/setLevel` (legacy), `server/discover`, `subscriptions/listen` (modern),
//! `tools/list` (the registry's definitions in order, `parameters` as `inputSchema`, in
//! pages of [`DEFAULT_PAGE_SIZE`](limits::DEFAULT_PAGE_SIZE) tools) and `tools/call`; with a
//! storage root ([`McpServer::with_resources`]) the files under it as resources
//! (`resources/list`, `resources/read`, `resources/templates/list`, `completion/complete`,
//! see [`resources`]); the prompts and resources of the registry's catalog
//! (`toolhost::catalog`: `prompts/list`, `prompts/get`, prompt completion, the sources'
//! resources after the files in `resources/list`; docs/protocol.md); with a root and
//! list changes on, `resources/subscribe` to files; and it reads the notifications
//! `notifications/initialized` and `notifications/cancelled` (which stops the call and
//! leaves it unanswered, as MCP asks).
//!
//! - A tool's result is one text block holding its content JSON-encoded (a JSON string is
//!   given as its text), with `isError: false`; when the tool declares an output schema,
//!   the checked result is also given as `structuredContent`. `tools/list` carries each
//!   tool's `title`, `annotations` (behaviour hints) and `outputSchema` when it has them.
//! - Every [`ToolError`](toolhost::registry::ToolError) (unknown tool, invalid arguments,
//!   panic, time-out, failure) is a result with `isError: true` and the model-facing
//!   message, never a protocol error: the model reads it and the session goes on.
//! - Malformed input gets a JSON-RPC error and the server keeps serving: a line that is not
//!   JSON gets `-32700` (with `"id": null` once a revision up to 2025-06-18 is negotiated,
//!   else with no `id` member, as 2025-11-25 and later ask), a message that is not a
//!   JSON-RPC 2.0 request gets `-32600` (a batch too, unless 2025-03-26 was negotiated:
//!   then it is served), an unknown method `-32601`, bad params `-32602`, a modern request
//!   for a version not served `-32022` listing the ones that are.
//! - Modern results carry `resultType: "complete"` and the server's identity in `_meta`;
//!   `tools/list` and `server/discover` say how long they may be cached (`ttlMs`).
//! - A client that sends a `progressToken` gets `notifications/progress` from long
//!   built-in calls (grep); one that set a log level gets `notifications/message` for its
//!   own calls ([`logging`], with [`log_layer`] installed). With
//!   [`McpServer::with_list_changed`], clients hear `notifications/tools/list_changed`
//!   when the registry's tools change (hot reload).
//! - A client that declared elicitation can be asked by a call's tools
//!   (`CallContext::interaction`) and, before a call an [`ApprovalPolicy`] names
//!   ([`McpServer::with_approval`]), for its user's approval: `elicitation/create` on the
//!   call's own channel (legacy revisions), or an `input_required` result the client
//!   answers by repeating the call (2026-07-28). Each question is bounded ([`elicit`]);
//!   a call not approved is not run and answers a tool error saying why.
//! - From 2025-11-25 on (as the extension `io.modelcontextprotocol/tasks` in 2026-07-28),
//!   a client may run a tool that allows it ([`TaskSupport`](toolhost::registry::TaskSupport))
//!   as an MCP *task*: `tools/call` with `task` is answered at once with a random task id,
//!   the call runs in the background under its own time limit, and `tasks/get`,
//!   `tasks/result`, `tasks/list` and `tasks/cancel` reach the caller's session's tasks
//!   only. 2026-07-28 follows the extension as published (ext-tasks e434597): the
//!   client declares it in its request's capabilities, the result comes inline from
//!   `tasks/get`, a task's questions are `inputRequests` answered by `tasks/update`,
//!   changes come as `notifications/tasks` through `subscriptions/listen`, and there is
//!   no `tasks/result` nor `tasks/list`. How many tasks, how long, and how many result
//!   bytes are kept are [`McpLimits`] (docs/protocol.md, "Tasks").
//! - Tool calls run concurrently, each in its own task with a fresh turn id; over stdio,
//!   responses go out through one writer, so lines never interleave, and the session id
//!   is fixed per server.
//! - Ids are answered byte for byte as sent (`18446744073709551616`, `1e400`, `"\u0078"`),
//!   and tool arguments reach the registry as the client's own text: neither goes through
//!   a `u64`/`f64` on the way (they are kept as the client's raw JSON text).
//! - Nothing a client sends grows the host without bound ([`McpLimits`]): at most
//!   [`DEFAULT_MAX_IN_FLIGHT`](limits::DEFAULT_MAX_IN_FLIGHT) tool calls run at once and [`DEFAULT_MAX_QUEUED_CALLS`](limits::DEFAULT_MAX_QUEUED_CALLS)
//!   more wait in order for a place, holding at most [`DEFAULT_MAX_IN_FLIGHT_BYTES`](limits::DEFAULT_MAX_IN_FLIGHT_BYTES) of
//!   arguments between them, and at most [`DEFAULT_MAX_QUEUED_BYTES`](limits::DEFAULT_MAX_QUEUED_BYTES) of answers wait for
//!   the client to read them. Calls at the in-flight limit never stop the reading: a
//!   cancellation or a ping is read and acted on at once. Past the other limits the
//!   server stops reading until there is room again (backpressure: no request is
//!   refused, the client's writes wait). Progress and log notifications are dropped
//!   rather than waited for. The tool list is encoded once per registry generation and
//!   shared.
//! - Logs go through `tracing`; the binary sends them to stderr, as stdout is the protocol
//!   over stdio.
//! - The methods themselves are answered by a transport-independent core, `Session`
//!   (one message in, zero or one response out, plus the server's own notifications
//!   through a `Notifier`); [`McpServer`] is its stdio transport, and `http` (feature
//!   `http`) its Streamable HTTP transport, with sessions, tokens and the Host/Origin
//!   checks (docs/deploy.md).
//!
//! ```
//! use std::sync::Arc;
//! use toolhost_mcp::McpServer;
//! use toolhost::registry::{Arguments, CallContext, Environment, Registry, ToolDefinition, ToolResult};
//! use toolhost_sdk::schema::{object, string};
//!
//! let registry = Registry::new();
//! registry.register(
//!     ToolDefinition::new("greet", "Greet a person by name.", object([("name", string("Who to greet."))], ["name"])),
//!     |_ctx: CallContext, args: Arguments, _env: Environment| async move {
//!         Ok(ToolResult::new(format!("Hello, {}!", args.required_str("name")?)))
//!     },
//! )?;
//! let input = concat!(
//!     "not json\n",
//!     r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"greet","arguments":{"name":"Ada"}}}"#, "\n",
//! );
//! let mut output = Vec::new();
//! # tokio::runtime::Runtime::new()?.block_on(async {
//! McpServer::new(Arc::new(registry)).serve(input.as_bytes(), &mut output).await?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # })?;
//! let lines: Vec<&str> = std::str::from_utf8(&output)?.lines().collect();
//! assert_eq!(lines, [
//!     r#"{"error":{"code":-32700,"message":"Parse error: the line is not valid JSON (expected ident at line 1 column 2); send one JSON-RPC 2.0 message per line"},"jsonrpc":"2.0"}"#,
//!     r#"{"id":1,"jsonrpc":"2.0","result":{"content":[{"text":"Hello, Ada!","type":"text"}],"isError":false}}"#,
//! ]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Why not rmcp
//! The official Rust SDK (`rmcp` 3.11) was tried first, behind our own line transport (its
//! stdio transport deliberately drops unparsable lines without an answer and leaves the
//! `id` out of error responses, where JSON-RPC 2.0 asks for `-32700` with id `null`). Even
//! then its typed request decoding answered `tools/call` with non-object `arguments` with
//! `-32601 "tools/call"` (method not found) instead of letting our registry return an
//! invalid-arguments tool result; `{"jsonrpc":"2.0","id":7}` and `[1,2]` got no answer at
//! all; and a notification arriving before `initialize` ended the session. Fixing that meant
//! validating every message's JSON-RPC shape ourselves in front of it, at which point the
//! SDK only routed five methods. This layer is that validation plus the five methods.
#![deny(missing_docs)]

mod approval;
mod content;
mod convert;
mod counters;
pub mod elicit;
#[cfg(feature = "http")]
pub mod http;
mod jsonrpc;
pub mod limits;
pub mod logging;
mod pagination;
#[cfg(feature = "http")]
pub mod policy;
mod prompts;
mod protocol;
pub mod resources;
mod revision;
mod server;
mod session;
pub mod state;
mod tasks;

pub use approval::{ApprovalPolicy, MAX_NOTE_BYTES, MAX_SHOWN_ARGUMENT_BYTES};
pub use convert::SUPPORTED_PROTOCOL_VERSIONS;
pub use counters::REFUSAL_STATUSES;
pub use jsonrpc::{
    HEADER_MISMATCH, MISSING_REQUIRED_CLIENT_CAPABILITY, QUOTA_EXCEEDED,
    UNSUPPORTED_PROTOCOL_VERSION,
};
pub use limits::{McpLimits, McpStats};
pub use logging::{broadcast_span, log_layer, LogLevel};
pub use protocol::SERVER_NAME;
pub use resources::FileResources;
pub use revision::Revision;
pub use server::McpServer;

/// Why serving stopped before the input ended. The OS error is the
/// [`source`](std::error::Error::source), not repeated in the text: print the chain
/// (`anyhow`'s `{:#}`) to show it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// Reading the input failed.
    #[error("reading MCP input failed")]
    Read(#[source] std::io::Error),
    /// Writing a response failed (the client closed its end).
    #[error("writing an MCP response failed (did the client exit?)")]
    Write(#[source] std::io::Error),
}

#[cfg(test)]
mod protocol_tests;
#[cfg(test)]
mod tests;
