//! The protocol rules both eras share a server with, independent of the transport: what a
//! request's envelope (`params._meta`) says, which methods each era answers, and the
//! fields each revision adds to a result.
//!
//! A request is **modern** when its `_meta` carries `io.modelcontextprotocol/protocolVersion`
//! or `io.modelcontextprotocol/clientCapabilities` (or its method exists only in the modern
//! era: `server/discover`, `subscriptions/listen`); it is then served by the revision it
//! names, whatever came before on the connection. Any other request is **legacy**, served by
//! the revision `initialize` settled (or, before any `initialize`, the newest legacy one:
//! this server does not insist on the handshake).
//!
//! Crate-private (the crate's API is the two servers); in outline (its unit tests run
//! the same):
//!
//! ```text
//! use serde_json::json;
//! use toolhost_mcp::{protocol, Params, RequestId, Revision};
//!
//! let params = Params::parse(&json!({"_meta": {
//!     "io.modelcontextprotocol/protocolVersion": "2026-07-28",
//!     "io.modelcontextprotocol/clientCapabilities": {},
//!     "progressToken": "p1",
//! }}).to_string()).unwrap();
//! let meta = protocol::read_meta(&RequestId::from(1), "tools/list", &params, None).unwrap();
//! assert_eq!((meta.revision, meta.modern), (Revision::V2026_07_28, true));
//! assert_eq!(meta.progress_token.unwrap().as_json(), r#""p1""#);
//!
//! // A version this server does not speak: -32022, with the versions it does.
//! let params = Params::parse(&json!({"_meta": {
//!     "io.modelcontextprotocol/protocolVersion": "2099-01-01",
//!     "io.modelcontextprotocol/clientCapabilities": {},
//! }}).to_string()).unwrap();
//! let err = protocol::read_meta(&RequestId::from(2), "tools/list", &params, None).unwrap_err();
//! assert_eq!(err.code, -32022);
//! assert_eq!(err.data.unwrap()["requested"], "2099-01-01");
//! ```

use serde_json::{json, Map, Value};

use super::jsonrpc::{
    raw_type_name, Params, RequestId, RpcError, INVALID_PARAMS, METHOD_NOT_FOUND,
    UNSUPPORTED_PROTOCOL_VERSION,
};
use super::logging::LogLevel;
use super::revision::Revision;

/// The name the server gives in `serverInfo`.
pub const SERVER_NAME: &str = "wasm-toolhost";

/// `_meta` key: the request's protocol version (modern era, required).
pub(crate) const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
/// `_meta` key: the client's capabilities for this request (modern era, required).
pub(crate) const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
/// `_meta` key: the least severe log level to send for this request (modern era).
pub(crate) const META_LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";
/// `_meta` key of a result: the server's name and version (modern era).
pub(crate) const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
/// `_meta` key of a notification on a `subscriptions/listen` stream: the subscription.
pub(crate) const META_SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

/// How long a client may keep a `tools/list` or `server/discover` answer (`ttlMs`) when
/// the tools never change while the server runs: 5 minutes (a restart with other
/// plugins is the only change, and a client reconnects then anyway).
pub(crate) const STATIC_TTL_MS: u64 = 5 * 60 * 1000;
/// `ttlMs` while the plugins directory is watched (hot reload): 10 seconds, so a client
/// that does not listen for `notifications/tools/list_changed` still sees a change soon.
pub(crate) const WATCHED_TTL_MS: u64 = 10 * 1000;

/// What one request's envelope says.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub(crate) struct RequestMeta {
    /// The revision the request is served by.
    pub revision: Revision,
    /// Whether it came in the modern envelope (per-request `_meta`): its result then
    /// carries `resultType` and the server's identity, and legacy-only methods are unknown.
    pub modern: bool,
    /// The client's `progressToken`, when it wants progress notifications.
    pub progress_token: Option<RequestId>,
    /// The least severe log level to forward for this request (modern `_meta` logLevel).
    pub log_level: Option<LogLevel>,
    /// Whether the request's client capabilities (modern `_meta`) declare form
    /// elicitation, so its call may answer `input_required`. Always false for legacy
    /// requests (their session's `initialize` says).
    pub client_asks: bool,
    /// Whether the request's client capabilities (modern `_meta`) declare sampling, so
    /// its call may answer `input_required` with a `sampling/createMessage`. Always
    /// false for legacy requests.
    pub client_samples: bool,
    /// Whether the request's client capabilities (modern `_meta`) declare the tasks
    /// extension (`extensions["io.modelcontextprotocol/tasks"]`), so its `tools/call`
    /// may be answered with a task and it may use `tasks/*`. Always false for legacy
    /// requests (their `task` param and session capabilities say).
    pub client_tasks: bool,
    /// The client's W3C trace context (`_meta.traceparent`), when well formed; a
    /// malformed one is ignored (tracing never refuses a request).
    pub trace_parent: Option<toolhost::registry::TraceParent>,
}

impl RequestMeta {
    /// A legacy request of `revision` without a progress token or log level.
    pub(crate) fn legacy(revision: Revision) -> Self {
        Self {
            revision,
            modern: false,
            progress_token: None,
            log_level: None,
            client_asks: false,
            client_samples: false,
            client_tasks: false,
            trace_parent: None,
        }
    }
}

/// Methods only the modern era has: their requests must come in the modern envelope.
const MODERN_ONLY: &[&str] = &["server/discover", "subscriptions/listen"];

/// Reads a request's envelope. `negotiated` is the revision `initialize` settled on this
/// connection, if any.
///
/// # Errors
/// [`INVALID_PARAMS`] for a `_meta` that is not an object, a modern request without its
/// protocol version or client capabilities, a bad `progressToken` or log level;
/// [`UNSUPPORTED_PROTOCOL_VERSION`] (with `data.supported` and `data.requested`) for a
/// version this server does not speak.
pub(crate) fn read_meta(
    id: &RequestId,
    method: &str,
    params: &Params,
    negotiated: Option<Revision>,
) -> Result<RequestMeta, RpcError> {
    let invalid = |what: String| {
        RpcError::new(
            id.clone(),
            INVALID_PARAMS,
            format!("Invalid params: {what}"),
        )
    };
    let meta: Map<String, Value> = match params.raw("_meta") {
        None => Map::new(),
        Some(raw) => match params.value("_meta") {
            Some(Value::Object(meta)) => meta,
            Some(Value::Null) => Map::new(),
            _ => {
                return Err(invalid(format!(
                    "\"_meta\" must be an object, got {}",
                    raw_type_name(raw)
                )))
            }
        },
    };
    let progress_token = match meta.get("progressToken") {
        None | Some(Value::Null) => None,
        Some(token @ Value::String(_)) => RequestId::parse(&token.to_string()),
        Some(Value::Number(n)) if n.is_i64() || n.is_u64() => RequestId::parse(&n.to_string()),
        Some(other) => {
            return Err(invalid(format!(
                "\"_meta.progressToken\" must be a string or an integer, got {}",
                toolhost::registry::json_type(other)
            )))
        }
    };
    // Any version's envelope may carry it; strict parsing, so a huge or malformed value
    // costs a length check and is dropped.
    let trace_parent = meta
        .get("traceparent")
        .and_then(Value::as_str)
        .and_then(toolhost::registry::TraceParent::parse);
    let modern = meta.contains_key(META_PROTOCOL_VERSION)
        || meta.contains_key(META_CLIENT_CAPABILITIES)
        || MODERN_ONLY.contains(&method);
    if !modern {
        let revision = negotiated.unwrap_or(Revision::NEWEST_LEGACY);
        return Ok(RequestMeta {
            progress_token,
            trace_parent,
            ..RequestMeta::legacy(revision)
        });
    }
    let requested = match meta.get(META_PROTOCOL_VERSION) {
        Some(Value::String(version)) => version.clone(),
        Some(other) => {
            return Err(invalid(format!(
                "\"_meta\" member \"{META_PROTOCOL_VERSION}\" must be a string such as \"2026-07-28\", got {}",
                toolhost::registry::json_type(other)
            )))
        }
        None => {
            return Err(invalid(format!(
                "{method} needs \"_meta\" with \"{META_PROTOCOL_VERSION}\" (e.g. \"2026-07-28\") and \"{META_CLIENT_CAPABILITIES}\" (an object, {{}} for none); legacy clients send initialize first"
            )))
        }
    };
    let Some(revision) = Revision::parse(&requested) else {
        return Err(unsupported_version(id, &requested));
    };
    if revision.is_modern() {
        match meta.get(META_CLIENT_CAPABILITIES) {
            Some(Value::Object(_)) => {}
            Some(other) => {
                return Err(invalid(format!(
                    "\"_meta\" member \"{META_CLIENT_CAPABILITIES}\" must be an object, got {}",
                    toolhost::registry::json_type(other)
                )))
            }
            None => {
                return Err(invalid(format!(
                    "\"_meta\" needs \"{META_CLIENT_CAPABILITIES}\": the client's capabilities for this request ({{}} for none)"
                )))
            }
        }
    }
    let log_level = match meta.get(META_LOG_LEVEL) {
        None | Some(Value::Null) => None,
        Some(Value::String(level)) => Some(LogLevel::parse(level).ok_or_else(|| {
            invalid(format!(
                "\"_meta\" member \"{META_LOG_LEVEL}\" must be one of {}; got \"{level}\"",
                LogLevel::NAMES.join(", ")
            ))
        })?),
        Some(other) => {
            return Err(invalid(format!(
                "\"_meta\" member \"{META_LOG_LEVEL}\" must be a string, got {}",
                toolhost::registry::json_type(other)
            )))
        }
    };
    let client_asks = revision.is_modern()
        && meta
            .get(META_CLIENT_CAPABILITIES)
            .and_then(|capabilities| capabilities.get("elicitation"))
            .and_then(Value::as_object)
            .is_some_and(|modes| modes.is_empty() || modes.contains_key("form"));
    let client_samples = revision.is_modern()
        && meta
            .get(META_CLIENT_CAPABILITIES)
            .and_then(|capabilities| capabilities.get("sampling"))
            .is_some_and(Value::is_object);
    let client_tasks = revision.is_modern()
        && meta
            .get(META_CLIENT_CAPABILITIES)
            .and_then(|capabilities| capabilities.get("extensions"))
            .and_then(|extensions| extensions.get(crate::tasks::TASKS_EXTENSION))
            .is_some_and(Value::is_object);
    Ok(RequestMeta {
        revision,
        modern: revision.is_modern(),
        progress_token,
        log_level,
        client_asks,
        client_samples,
        client_tasks,
        trace_parent,
    })
}

/// The `-32022` error for a request asking for `requested`.
pub(crate) fn unsupported_version(id: &RequestId, requested: &str) -> RpcError {
    let supported: Vec<&str> = Revision::ALL.iter().map(|r| r.as_str()).collect();
    RpcError::new(
        id.clone(),
        UNSUPPORTED_PROTOCOL_VERSION,
        format!(
            "Unsupported protocol version \"{requested}\"; this server speaks {}",
            supported.join(", ")
        ),
    )
    .with_data(json!({ "supported": supported, "requested": requested }))
}

/// The methods a request of this era is answered for.
pub(crate) fn methods(modern: bool) -> &'static [&'static str] {
    if modern {
        &[
            "server/discover",
            "tools/list",
            "tools/call",
            "subscriptions/listen",
        ]
    } else {
        &[
            "initialize",
            "ping",
            "tools/list",
            "tools/call",
            "logging/setLevel",
        ]
    }
}

/// The methods a server with resources ([`FileResources`](crate::FileResources))
/// answers besides [`methods`], in both eras.
pub(crate) const RESOURCE_METHODS: &[&str] = &[
    "resources/list",
    "resources/read",
    "resources/templates/list",
    "completion/complete",
];

/// The `-32601` error for `method`, naming what this server answers in the request's era
/// (the resource methods too when it has `resources`), and saying so when the method
/// was removed in 2026-07-28.
pub(crate) fn method_not_found(
    id: &RequestId,
    method: &str,
    meta: &RequestMeta,
    resources: bool,
) -> RpcError {
    let mut answered = methods(meta.modern).join(", ");
    if resources {
        answered.push_str(", ");
        answered.push_str(&RESOURCE_METHODS.join(", "));
    }
    let message = if meta.modern && methods(false).contains(&method) {
        format!("Method not found: {method} was removed in protocol version {}; this server answers {answered} there", meta.revision)
    } else {
        format!("Method not found: {method}; this server answers {answered}")
    };
    RpcError::new(id.clone(), METHOD_NOT_FOUND, message)
}

/// The server's name and version, as `serverInfo` and `_meta`'s serverInfo give them.
pub(crate) fn server_info() -> Value {
    json!({ "name": SERVER_NAME, "version": env!("CARGO_PKG_VERSION") })
}

/// The capabilities this server declares: tools (with `listChanged` when it tells clients
/// of changes) and logging; with `resources` (the files under its root), resources
/// (without subscriptions or list changes) and completions.
pub(crate) fn capabilities(list_changed: bool, resources: bool) -> Value {
    if resources {
        json!({
            "tools": { "listChanged": list_changed },
            "logging": {},
            "resources": {},
            "completions": {},
        })
    } else {
        json!({ "tools": { "listChanged": list_changed }, "logging": {} })
    }
}

/// `result` with what a modern result carries besides its own fields: `resultType:
/// "complete"` and the server's identity in `_meta`. A legacy result is left as it is.
pub(crate) fn complete(meta: &RequestMeta, mut result: Value) -> Value {
    if meta.modern {
        if let Value::Object(fields) = &mut result {
            fields.insert("resultType".into(), json!("complete"));
            let extra = fields.entry("_meta").or_insert_with(|| json!({}));
            if let Value::Object(extra) = extra {
                extra.insert(META_SERVER_INFO.into(), server_info());
            }
        }
    }
    result
}

/// The `server/discover` result: every revision served, the capabilities, the server's
/// identity, and how long a client may keep it.
pub(crate) fn discover_result(meta: &RequestMeta, list_changed: bool, resources: bool) -> Value {
    let supported: Vec<&str> = Revision::ALL.iter().map(|r| r.as_str()).collect();
    complete(
        meta,
        json!({
            "supportedVersions": supported,
            "capabilities": capabilities(list_changed, resources),
            "ttlMs": ttl_ms(list_changed),
            "cacheScope": "public",
        }),
    )
}

/// `ttlMs` for lists and discovery: [`WATCHED_TTL_MS`] while tools may change, else
/// [`STATIC_TTL_MS`].
pub(crate) fn ttl_ms(list_changed: bool) -> u64 {
    if list_changed {
        WATCHED_TTL_MS
    } else {
        STATIC_TTL_MS
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(value: Value) -> Params {
        Params::parse(&value.to_string()).unwrap()
    }

    fn modern(extra: Value) -> Params {
        let mut meta = json!({
            META_PROTOCOL_VERSION: "2026-07-28",
            META_CLIENT_CAPABILITIES: {},
        });
        for (key, value) in extra.as_object().unwrap() {
            meta[key] = value.clone();
        }
        params(json!({ "_meta": meta }))
    }

    fn err(method: &str, params: &Params) -> (i64, String) {
        let err = read_meta(&RequestId::from(7), method, params, None).unwrap_err();
        assert_eq!(err.id, RequestId::from(7));
        (err.code, err.message)
    }

    #[test]
    fn legacy_requests_take_the_negotiated_revision() {
        let plain = params(json!({"name": "x"}));
        assert_eq!(
            read_meta(&RequestId::from(1), "tools/list", &plain, None).unwrap(),
            RequestMeta::legacy(Revision::V2025_11_25)
        );
        let with_token = params(json!({"_meta": {"progressToken": 5}}));
        let meta = read_meta(
            &RequestId::from(1),
            "tools/call",
            &with_token,
            Some(Revision::V2025_03_26),
        )
        .unwrap();
        assert_eq!((meta.revision, meta.modern), (Revision::V2025_03_26, false));
        assert_eq!(meta.progress_token, Some(RequestId::from(5)));
    }

    #[test]
    fn modern_requests_name_their_revision() {
        let meta = read_meta(
            &RequestId::from(1),
            "tools/list",
            &modern(json!({META_LOG_LEVEL: "warning"})),
            Some(Revision::V2024_11_05),
        )
        .unwrap();
        assert_eq!(meta.revision, Revision::V2026_07_28);
        assert!(meta.modern);
        assert_eq!(meta.log_level, Some(LogLevel::Warning));
    }

    #[test]
    fn malformed_envelopes_are_invalid_params() {
        // server/discover is modern-only: no _meta at all is malformed.
        let (code, message) = err("server/discover", &params(json!({})));
        assert_eq!(code, INVALID_PARAMS);
        assert!(message.contains(META_PROTOCOL_VERSION), "{message}");
        // A version without capabilities, capabilities without a version.
        let no_caps = params(json!({"_meta": {META_PROTOCOL_VERSION: "2026-07-28"}}));
        assert_eq!(err("tools/list", &no_caps).0, INVALID_PARAMS);
        let no_version = params(json!({"_meta": {META_CLIENT_CAPABILITIES: {}}}));
        assert_eq!(err("tools/list", &no_version).0, INVALID_PARAMS);
        for (extra, what) in [
            // The type names are those of every message about JSON values
            // (toolhost::registry::json_type): an integer is `integer`.
            (
                json!({META_PROTOCOL_VERSION: 2026}),
                "must be a string such as \"2026-07-28\", got integer",
            ),
            (
                json!({META_CLIENT_CAPABILITIES: []}),
                "must be an object, got array",
            ),
            (
                json!({META_LOG_LEVEL: "loud"}),
                "must be one of debug, info",
            ),
            (
                json!({META_LOG_LEVEL: true}),
                "must be a string, got boolean",
            ),
            (
                json!({"progressToken": 1.5}),
                "must be a string or an integer, got number",
            ),
            (
                json!({"progressToken": {}}),
                "must be a string or an integer, got object",
            ),
        ] {
            let (code, message) = err("tools/list", &modern(extra.clone()));
            assert_eq!(code, INVALID_PARAMS, "{extra}");
            assert!(message.contains(what), "{extra}: {message}");
        }
        let (code, message) = err("tools/list", &params(json!({"_meta": 3})));
        assert_eq!(
            (code, message.as_str()),
            (
                INVALID_PARAMS,
                "Invalid params: \"_meta\" must be an object, got number"
            )
        );
    }

    #[test]
    fn a_well_formed_traceparent_is_kept_and_a_malformed_one_ignored() {
        let good = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let p = params(json!({"name": "t", "_meta": {"traceparent": good}}));
        let meta = read_meta(&RequestId::from(1), "tools/call", &p, None).unwrap();
        assert_eq!(
            meta.trace_parent.map(|t| t.to_string()).as_deref(),
            Some(good)
        );
        let huge = format!("{good}{}", "f".repeat(1 << 20));
        for bad in [
            json!(huge),
            json!("00-xyz"),
            json!(42),
            json!({"traceparent": good}),
            json!(null),
        ] {
            let p = params(
                json!({"name": "t", "_meta": {"traceparent": bad, "tracestate": "k=".repeat(100_000)}}),
            );
            let meta = read_meta(&RequestId::from(2), "tools/call", &p, None).unwrap();
            assert_eq!(meta.trace_parent, None);
        }
    }

    #[test]
    fn unknown_versions_list_the_supported_ones() {
        let p = params(
            json!({"_meta": {META_PROTOCOL_VERSION: "v999.0.0", META_CLIENT_CAPABILITIES: {}}}),
        );
        let err = read_meta(&RequestId::from(301), "server/discover", &p, None).unwrap_err();
        assert_eq!(err.code, UNSUPPORTED_PROTOCOL_VERSION);
        assert_eq!(
            err.data,
            Some(json!({
                "supported": ["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"],
                "requested": "v999.0.0",
            }))
        );
    }

    #[test]
    fn modern_results_say_complete_and_who_answered() {
        let meta = RequestMeta {
            modern: true,
            ..RequestMeta::legacy(Revision::V2026_07_28)
        };
        assert_eq!(
            complete(&meta, json!({"tools": []})),
            json!({"tools": [], "resultType": "complete", "_meta": {META_SERVER_INFO: server_info()}})
        );
        let legacy = RequestMeta::legacy(Revision::V2025_06_18);
        assert_eq!(
            complete(&legacy, json!({"tools": []})),
            json!({"tools": []})
        );
        let discover = discover_result(&meta, true, false);
        assert_eq!(discover["capabilities"]["tools"]["listChanged"], true);
        assert_eq!(discover["ttlMs"], WATCHED_TTL_MS);
        assert_eq!(discover["cacheScope"], "public");
        assert_eq!(discover["supportedVersions"][0], "2026-07-28");
    }

    #[test]
    fn removed_methods_are_named_as_such() {
        let meta = RequestMeta {
            modern: true,
            ..RequestMeta::legacy(Revision::V2026_07_28)
        };
        let err = method_not_found(&RequestId::from(1), "ping", &meta, false);
        assert_eq!(err.code, METHOD_NOT_FOUND);
        assert_eq!(err.message, "Method not found: ping was removed in protocol version 2026-07-28; this server answers server/discover, tools/list, tools/call, subscriptions/listen there");
        let legacy = RequestMeta::legacy(Revision::V2025_06_18);
        assert_eq!(
            method_not_found(&RequestId::from(1), "nope", &legacy, false).message,
            "Method not found: nope; this server answers initialize, ping, tools/list, tools/call, logging/setLevel"
        );
    }
}
