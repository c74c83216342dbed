//! A plugin's manifest, `NAME.toml` next to `NAME.wasm`: the grants it asks for and the
//! limits it wants, resolved against the host's policy.
//!
//! ```toml
//! # wordcount.toml
//! namespace = "wc"        # optional: tools and prompts offered as wc_NAME (see namespace);
//!                         # the operator's --plugin-namespace replaces it
//! task_support = "optional" # MCP tasks: "forbidden" (default), "optional" or "required",
//!                         # for every tool of the plugin (before the tables)
//! [grants]
//! files = "read"          # "none" (default), "read" or "read-write"
//! root = "docs"           # optional: the plugin sees only this sub-tree, as its root
//! http = ["api.example.org", "*.example.net:8443", "http://localhost:8080"]
//!                         # hosts it may send HTTP requests to (see http_policy)
//! ask = true              # may ask the client's user (0.3.0 interaction; --plugin-ask)
//! sampling = { max_requests = 4, max_tokens = 1024 }
//!                         # may ask the client's model for completions (0.3.0 sampling;
//!                         # --plugin-sampling): requests per call (1 to 16) and tokens
//!                         # per request (1 to 32768); `sampling = true` means these
//!                         # defaults
//! tools = ["read_file", "grep"]
//!                         # may list and call these tools of its registry (0.3.0
//!                         # registry; --plugin-tools), or tools = "*" for all of them
//! max_tool_calls = 16     # tool calls per call of the plugin (1 to 64, default 64)
//!
//! [config]                # keys the operator gives values for (see plugin_config)
//! keys = ["REGION"]       # short form: required, not secret
//! [config.API_TOKEN]
//! description = "Token for api.example.org"
//! secret = true           # kept out of logs and errors
//! required = true         # default true: the plugin does not load without it
//!
//! [limits]                # each optional; the host's default applies otherwise
//! timeout_ms = 5000       # wall time per call
//! task_timeout_ms = 60000 # wall time per MCP task: lowers the server's --task-timeout
//! memory_mib = 32         # linear memory
//! fuel = 1000000          # instructions per call (roughly)
//! max_output_bytes = 65536
//! max_stderr_bytes = 16384
//! max_instances = 16
//! max_tables = 16
//! # what the plugin may do through the host's imports (see ImportLimits); a manifest
//! # may only lower these below the host's maximum (by default, the defaults)
//! max_file_calls = 1000               # files calls per tool call
//! max_read_bytes = 268435456          # bytes read per tool call
//! max_write_bytes_per_call = 16777216 # bytes written per tool call
//! max_files_written_per_call = 100    # files written per tool call
//! max_write_bytes_total = 1073741824  # bytes written over the host's lifetime
//! max_files_written_total = 10000     # files written over the host's lifetime
//! log_lines_per_second = 100          # log lines a second, all calls together
//! log_burst = 1000                    # log lines at once before the rate applies
//! max_handles = 256       # host handles (pollables, streams) held at once
//! max_http_requests = 16              # HTTP requests per tool call
//! max_http_request_bytes = 1048576    # request body bytes
//! max_http_response_bytes = 8388608   # response body bytes
//! http_connect_timeout_ms = 5000      # resolve + connect + TLS handshake
//! ```
//!
//! No manifest means no grant and the default limits. An unknown key is an error naming
//! it. A manifest asking for more file access than the host allows is refused
//! ([`PluginErrorKind::GrantDenied`](crate::PluginErrorKind::GrantDenied)): the plugin is not loaded, and the log says how to
//! allow it; so is one asking for an HTTP host the operator does not allow
//! ([`PluginErrorKind::HttpDenied`](crate::PluginErrorKind::HttpDenied)), and one declaring a required config key the
//! operator gave no value ([`PluginErrorKind::ConfigMissing`](crate::PluginErrorKind::ConfigMissing)). Refusing, rather than
//! loading with less, keeps a tool that could never work
//! out of the model's tool list. A limit above the host's maximum is refused the same
//! way ([`PluginErrorKind::LimitTooHigh`](crate::PluginErrorKind::LimitTooHigh)). The host's maximum is, unless the operator raises
//! it, its default: a manifest may lower its limits, not raise them.
//!
//! The manifest must be a regular file of at most 64 KiB: a FIFO, device or directory is
//! refused without being read ([`PluginErrorKind::NotAFile`](crate::PluginErrorKind::NotAFile)), so it cannot block start-up.
//!
//! # Sandbox
//! `grants.root` is checked with the host's path policy, as any path argument of a
//! built-in tool ([`FilePolicy::check_root`](toolhost::vfs::FilePolicy::check_root)): a root with a hidden segment (`.git`,
//! `.ssh`, `_private`) is refused when the host hides hidden paths, and a `read-write`
//! grant is refused when the host is read-only. Every path the plugin then passes is
//! checked again as the full store path (root + path) by the `files` import.
//!
//! The manifest as written and its parsing are in `format.rs`; resolving it against the
//! host's policy in `resolve.rs`; both are re-exported here.

use std::path::{Path, PathBuf};

mod format;
mod resolve;
#[cfg(test)]
mod tests;

pub use format::{
    parse, parse_bytes, read, Grants, LimitOverrides, Manifest, ResourcesTable, SamplingGrant,
    ToolNames, ToolsGrant,
};
pub use resolve::{apply, resolve, resolve_bytes, resolve_for_inspection, Resolved};
pub(crate) use resolve::{resolve_bytes_with, Check};

/// The manifest path of a plugin: `NAME.toml` next to `NAME.wasm`.
pub fn manifest_path(wasm: &Path) -> PathBuf {
    wasm.with_extension("toml")
}
