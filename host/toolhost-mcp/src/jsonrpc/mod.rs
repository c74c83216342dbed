//! JSON-RPC 2.0 framing: one line in, a classified message (or the error to answer) out,
//! and the response lines written back.
//!
//! Only what MCP over stdio uses: single messages (MCP dropped batches in 2025-06-18),
//! ids that are strings or numbers, params that are objects. Everything else is answered
//! with the JSON-RPC error the 2.0 spec names for it, and the server keeps serving.
//!
//! Ids and params are kept as the JSON text the client sent ([`RequestId`], [`Params`]),
//! never read into a [`Value`](serde_json::Value) on the way through: a `Value` number is an `u64`, `i64` or
//! `f64`, so an id such as `18446744073709551616` would come back as
//! `1.8446744073709552e19` (and `1e400` would not parse at all), and the client could not
//! match its answer. Tool arguments go to the registry as the client's own text too.

mod id;
mod params;
mod parse;
mod raw;
mod response;

pub(crate) use id::RequestId;
pub(crate) use params::Params;
pub(crate) use parse::{parse_batch, parse_line, Incoming, ResponseBody};
pub(crate) use raw::raw_type_name;
#[cfg(test)]
pub(crate) use response::encode_response;
pub(crate) use response::{response_head, RpcError};

/// JSON-RPC error code: the line is not valid JSON.
pub(crate) const PARSE_ERROR: i64 = -32700;
/// JSON-RPC error code: valid JSON, but not a valid request object.
pub(crate) const INVALID_REQUEST: i64 = -32600;
/// JSON-RPC error code: no such method.
pub(crate) const METHOD_NOT_FOUND: i64 = -32601;
/// JSON-RPC error code: the method exists but its params are wrong.
pub(crate) const INVALID_PARAMS: i64 = -32602;
/// MCP error code (2026-07-28): the HTTP headers and the body disagree (`HeaderMismatch`).
pub const HEADER_MISMATCH: i64 = -32020;
/// MCP error code (2026-07-28): the request needs a client capability it did not declare
/// (`MissingRequiredClientCapability`).
pub const MISSING_REQUIRED_CLIENT_CAPABILITY: i64 = -32021;
/// MCP error code (2026-07-28): the request's protocol version is not served
/// (`UnsupportedProtocolVersion`); `data` lists the supported ones.
pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;
/// This server's error code (in JSON-RPC's implementation-defined range): the caller is
/// over a quota of its policy (`--policy`); the call did not run (a write over the
/// bytes quota wrote nothing). `data` holds `quota`, `limit` and `retryAfterSeconds`;
/// over HTTP the same refusal before a session reads the call is a `429`.
pub const QUOTA_EXCEEDED: i64 = -32029;

#[cfg(test)]
mod tests;
