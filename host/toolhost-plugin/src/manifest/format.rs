//! The manifest as written: the `[grants]`, `[limits]` and `[config]` tables as typed
//! structs (unknown keys refused), and reading and parsing the TOML file.

use std::path::Path;

use serde::Deserialize;

use crate::plugin_config::{check_key, ConfigKey, MAX_CONFIG_KEYS};
use crate::{PluginError, PluginErrorKind};

pub use crate::host::sampling_grant::SamplingGrant;
pub use crate::host::tools_grant::{ToolNames, ToolsGrant};

/// The manifest as written.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// `namespace = "gh"` (top level, before the tables): the plugin's tools and prompts
    /// are offered as `gh_NAME` ([`namespace`](crate::namespace): 1 to 32 characters of
    /// `a-z` and `0-9`, starting with a letter). The operator's
    /// [`tool_namespace`](crate::PluginHostConfigBuilder::tool_namespace) for the plugin
    /// replaces it. None by default: the names as the plugin declares them.
    #[serde(default, deserialize_with = "tool_namespace")]
    pub namespace: Option<String>,
    /// `task_support` (before the tables): whether clients may run the plugin's tools
    /// as MCP tasks, in the background with their result fetched later: `"forbidden"`
    /// (the default, as MCP's), `"optional"` or `"required"`; for every tool of the
    /// plugin.
    #[serde(default)]
    pub task_support: Option<toolhost::registry::TaskSupport>,
    /// `[grants]`.
    #[serde(default)]
    pub grants: Grants,
    /// `[limits]`.
    #[serde(default)]
    pub limits: LimitOverrides,
    /// `[config]`: the keys the plugin reads, sorted by name.
    #[serde(default, deserialize_with = "config_keys")]
    pub config: Vec<ConfigKey>,
    /// `confirm = true` (top level, before the tables): every call of the plugin's tools
    /// needs the user's approval before it runs, when the host serves MCP (the host
    /// asks through elicitation; a client that cannot ask gets the calls refused).
    /// Off by default.
    #[serde(default)]
    pub confirm: bool,
    /// `[resources]`.
    #[serde(default)]
    pub resources: ResourcesTable,
}

/// The `[resources]` table (0.3.0 plugins that export `resources`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResourcesTable {
    /// `namespace = "weather://"`: the URI prefix the plugin's resources live under,
    /// instead of `plugin://<name>/`. Never `file://`, never overlapping another
    /// plugin's (checked at load).
    #[serde(default)]
    pub namespace: Option<String>,
}

/// Parses and checks the top-level `namespace`.
fn tool_namespace<'de, D: serde::Deserializer<'de>>(de: D) -> Result<Option<String>, D::Error> {
    use serde::de::Error;
    let namespace = String::deserialize(de)?;
    crate::namespace::check_namespace(&namespace)
        .map_err(|err| D::Error::custom(format!("namespace: {err}")))?;
    Ok(Some(namespace))
}

/// Parses `[config]`: `keys = ["A", "B"]` (required, not secret) and `[config.KEY]`
/// tables with `description`, `secret` and `required`.
fn config_keys<'de, D: serde::Deserializer<'de>>(de: D) -> Result<Vec<ConfigKey>, D::Error> {
    use serde::de::Error;
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Spec {
        description: Option<String>,
        #[serde(default)]
        secret: bool,
        #[serde(default = "yes")]
        required: bool,
    }
    fn yes() -> bool {
        true
    }
    let table = toml::Table::deserialize(de)?;
    let mut keys: Vec<ConfigKey> = Vec::new();
    let mut add = |key: ConfigKey| -> Result<(), D::Error> {
        check_key(&key.name).map_err(D::Error::custom)?;
        if keys.iter().any(|k| k.name == key.name) {
            return Err(D::Error::custom(format!(
                "config key {} is declared twice",
                key.name
            )));
        }
        keys.push(key);
        Ok(())
    };
    for (name, value) in table {
        match value {
            toml::Value::Array(list) if name == "keys" => {
                for item in list {
                    let toml::Value::String(key) = item else {
                        return Err(D::Error::custom(
                            "config.keys must be a list of key names, e.g. keys = [\"API_TOKEN\"]",
                        ));
                    };
                    add(ConfigKey {
                        name: key,
                        description: None,
                        secret: false,
                        required: true,
                    })?;
                }
            }
            toml::Value::Table(spec) => {
                let spec: Spec = toml::Value::Table(spec).try_into().map_err(|err: toml::de::Error| {
                    D::Error::custom(format!(
                        "config.{name}: {}; give description, secret and required",
                        err.message().trim()
                    ))
                })?;
                add(ConfigKey {
                    name,
                    description: spec.description,
                    secret: spec.secret,
                    required: spec.required,
                })?;
            }
            _ => {
                return Err(D::Error::custom(format!(
                    "config.{name} must be a table ([config.{name}] with description, secret, required) or the list config.keys"
                )))
            }
        }
    }
    keys.sort_by(|a, b| a.name.cmp(&b.name));
    if keys.len() > MAX_CONFIG_KEYS {
        return Err(D::Error::custom(format!(
            "{} config keys declared; at most {MAX_CONFIG_KEYS}",
            keys.len()
        )));
    }
    Ok(keys)
}

/// The `[grants]` table.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Grants {
    /// `files = "none" | "read" | "read-write"`.
    #[serde(default)]
    pub files: Option<String>,
    /// `root = "sub/dir"`: confines file access to that sub-tree.
    #[serde(default)]
    pub root: Option<String>,
    /// `http = ["host", "*.domain:port", "http://host"]`: the hosts the plugin may send
    /// HTTP requests to ([`HostPattern`](crate::HostPattern)).
    #[serde(default)]
    pub http: Vec<String>,
    /// `ask = true`: the plugin may ask the client's user during a call (the 0.3.0
    /// `interaction` import), if the operator allows it too (`--plugin-ask`,
    /// [`PluginHostConfigBuilder::plugin_ask`](crate::PluginHostConfigBuilder::plugin_ask)).
    /// Default: `false`.
    #[serde(default)]
    pub ask: bool,
    /// `sampling = { max_requests = N, max_tokens = M }` (or `sampling = true` for the
    /// defaults): the plugin may ask the client's language model for completions during
    /// a call (the 0.3.0 `sampling` import), within these bounds, if the operator allows
    /// it too (`--plugin-sampling`,
    /// [`PluginHostConfigBuilder::plugin_sampling`](crate::PluginHostConfigBuilder::plugin_sampling)).
    /// Default: none (`sampling = false` says the same).
    #[serde(default, deserialize_with = "sampling_grant")]
    pub sampling: Option<SamplingGrant>,
    /// `tools = ["read_file", "grep"]` (or `tools = "*"`): the registry's tools the
    /// plugin may list and call during a call (the 0.3.0 `registry` import), if the
    /// operator allows them too (`--plugin-tools`,
    /// [`PluginHostConfigBuilder::plugin_tools`](crate::PluginHostConfigBuilder::plugin_tools)).
    /// Default: none. A plugin that asks for it composes: its own tools are never
    /// offered to a composing plugin.
    #[serde(default, deserialize_with = "tool_names")]
    pub tools: Option<ToolNames>,
    /// `max_tool_calls = N`: calls through the `registry` import per call of the plugin,
    /// 1 to 64 (default 64: a manifest may only lower it). Needs `tools`.
    #[serde(default, deserialize_with = "max_tool_calls")]
    pub max_tool_calls: Option<u32>,
}

impl Grants {
    /// The `registry` grant the manifest asks for (`tools` with `max_tool_calls`), if
    /// any.
    pub fn tools_grant(&self) -> Option<ToolsGrant> {
        self.tools.clone().map(|tools| ToolsGrant {
            tools,
            max_tool_calls: self.max_tool_calls.unwrap_or(ToolsGrant::MAX_TOOL_CALLS),
        })
    }
}

/// `[grants] tools` as written: `"*"` or a list of tool names.
fn tool_names<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<ToolNames>, D::Error> {
    use serde::de::Error as _;

    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Written {
        All(String),
        Names(Vec<String>),
    }

    let wrong = || {
        D::Error::custom(
            "grants.tools must be \"*\" or a list of tool names, e.g. tools = [\"read_file\", \"grep\"]",
        )
    };
    match Written::deserialize(deserializer).map_err(|_| wrong())? {
        Written::All(all) if all == "*" => Ok(Some(ToolNames::All)),
        Written::All(_) => Err(wrong()),
        Written::Names(names) => {
            if let Some(bad) = names
                .iter()
                .find(|name| toolhost::registry::check_name(name).is_err())
            {
                return Err(D::Error::custom(format!(
                    "grants.tools names {bad:?}, which is not a tool name (1 to 128 characters of a-z A-Z 0-9 _ -)"
                )));
            }
            Ok(Some(ToolNames::only(names)))
        }
    }
}

/// `[grants] max_tool_calls`: 1 to [`ToolsGrant::MAX_TOOL_CALLS`].
fn max_tool_calls<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<u32>, D::Error> {
    use serde::de::Error as _;
    let written = i64::deserialize(deserializer)?;
    let max = ToolsGrant::new(ToolNames::All, Some(u64::try_from(written).unwrap_or(0)))
        .map_err(|err| D::Error::custom(format!("grants.{err}")))?
        .max_tool_calls;
    Ok(Some(max))
}

/// `[grants] sampling` as written: `true`/`false`, or a table of bounds.
fn sampling_grant<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<SamplingGrant>, D::Error> {
    use serde::de::Error as _;

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Bounds {
        max_requests: Option<u64>,
        max_tokens: Option<u64>,
    }

    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Written {
        Flag(bool),
        Bounds(Bounds),
    }

    let written = Written::deserialize(deserializer).map_err(|_| {
        D::Error::custom(
            "grants.sampling must be true, false, or a table { max_requests = N, max_tokens = M }",
        )
    })?;
    match written {
        Written::Flag(false) => Ok(None),
        Written::Flag(true) => Ok(Some(SamplingGrant::default())),
        Written::Bounds(bounds) => {
            let narrow = |value: Option<u64>, default: u32| {
                value.map_or(Ok(default), |v| Ok(u32::try_from(v).unwrap_or(u32::MAX)))
            };
            let max_requests = narrow(bounds.max_requests, SamplingGrant::DEFAULT_MAX_REQUESTS)?;
            let max_tokens = narrow(bounds.max_tokens, SamplingGrant::DEFAULT_MAX_TOKENS)?;
            SamplingGrant::new(max_requests, max_tokens)
                .map(Some)
                .map_err(D::Error::custom)
        }
    }
}

/// The `[limits]` table; each key overrides the host's default.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitOverrides {
    /// Wall time per call, in milliseconds.
    pub timeout_ms: Option<u64>,
    /// Wall time per task (a call run in the background), in milliseconds: lowers the
    /// server's task time limit (`--task-timeout`) for this plugin's tools, never
    /// raises it. A task is still a call: `timeout_ms` applies to it too.
    pub task_timeout_ms: Option<u64>,
    /// Linear memory cap, in MiB.
    pub memory_mib: Option<u64>,
    /// Fuel per call.
    pub fuel: Option<u64>,
    /// Cap on the result's JSON text, in bytes.
    pub max_output_bytes: Option<usize>,
    /// Bytes of stderr (and stdout) kept per call.
    pub max_stderr_bytes: Option<usize>,
    /// Core instances per store.
    pub max_instances: Option<u32>,
    /// Tables (and memories) per store.
    pub max_tables: Option<u32>,
    /// `files` calls per tool call.
    pub max_file_calls: Option<u32>,
    /// Bytes read through `files` per tool call.
    pub max_read_bytes: Option<u64>,
    /// Bytes written through `files` per tool call.
    pub max_write_bytes_per_call: Option<u64>,
    /// Files written through `files` per tool call.
    pub max_files_written_per_call: Option<u32>,
    /// Bytes written by the plugin over the host's lifetime.
    pub max_write_bytes_total: Option<u64>,
    /// Files written by the plugin over the host's lifetime.
    pub max_files_written_total: Option<u64>,
    /// Log lines per second (all calls of the plugin together).
    pub log_lines_per_second: Option<u32>,
    /// Log lines at once before the rate applies.
    pub log_burst: Option<u32>,
    /// Host handles (pollables, streams) held at once.
    pub max_handles: Option<u32>,
    /// HTTP requests per tool call.
    pub max_http_requests: Option<u32>,
    /// Bytes of one HTTP request body.
    pub max_http_request_bytes: Option<u64>,
    /// Bytes of one HTTP response body.
    pub max_http_response_bytes: Option<u64>,
    /// Time to resolve, connect and handshake, in milliseconds.
    pub http_connect_timeout_ms: Option<u64>,
}

/// Reads and parses `path`; `Ok(None)` when there is no such file.
///
/// # Errors
/// [`PluginErrorKind::Io`] when it exists but cannot be read, [`PluginErrorKind::NotAFile`] when
/// it is not a regular file, [`PluginErrorKind::FileTooLarge`] over
/// 64 KiB, [`PluginErrorKind::Manifest`] when it
/// is not valid.
pub fn read(path: &Path) -> Result<Option<Manifest>, PluginError> {
    match crate::read::read_manifest_bytes(path)? {
        Some(bytes) => parse_bytes(path, bytes).map(Some),
        None => Ok(None),
    }
}

/// Parses manifest bytes (UTF-8 TOML); `path` is for the error message.
///
/// # Errors
/// [`PluginErrorKind::Manifest`] when they are not UTF-8 or not a valid manifest.
pub fn parse_bytes(path: &Path, bytes: Vec<u8>) -> Result<Manifest, PluginError> {
    let text = String::from_utf8(bytes).map_err(|err| {
        PluginErrorKind::Manifest {
            message: format!(
                "it is not UTF-8 text (invalid byte at offset {}); save it as UTF-8",
                err.utf8_error().valid_up_to()
            ),
        }
        .at(path.to_owned())
    })?;
    parse(path, &text)
}

/// Parses manifest text; `path` is for the error message.
///
/// # Errors
/// [`PluginErrorKind::Manifest`] naming the bad or unknown key.
pub fn parse(path: &Path, text: &str) -> Result<Manifest, PluginError> {
    let manifest: Manifest = toml::from_str(text).map_err(|err| {
        let line = err
            .span()
            .map(|span| format!("line {}: ", text.as_bytes()[..span.start.min(text.len())].iter().filter(|&&b| b == b'\n').count() + 1))
            .unwrap_or_default();
        PluginErrorKind::Manifest { message: format!(
                "{line}{}; the keys are namespace, task_support, confirm, [grants] files, root, http, ask, sampling (true or {{ max_requests, max_tokens }}), tools (\"*\" or a list of tool names), max_tool_calls, [config] keys or [config.KEY] description, secret, required, [resources] namespace, and [limits] timeout_ms, task_timeout_ms, memory_mib, fuel, max_output_bytes, max_stderr_bytes, max_instances, max_tables, max_file_calls, max_read_bytes, max_write_bytes_per_call, max_files_written_per_call, max_write_bytes_total, max_files_written_total, log_lines_per_second, log_burst, max_handles, max_http_requests, max_http_request_bytes, max_http_response_bytes, http_connect_timeout_ms",
                err.message().trim()
            ) }.at(path.to_owned())
    })?;
    if manifest.grants.max_tool_calls.is_some() && manifest.grants.tools.is_none() {
        return Err(PluginErrorKind::Manifest {
            message: "[grants] max_tool_calls bounds the calls of the tools the plugin may call, but it names none: add `tools = [\"NAME\", ...]` (or `tools = \"*\"`) or remove max_tool_calls".into(),
        }
        .at(path.to_owned()));
    }
    Ok(manifest)
}
