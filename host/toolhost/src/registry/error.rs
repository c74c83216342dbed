//! Errors of registration and dispatch.

use std::time::Duration;

/// Why a tool call failed. Every variant is shown to the model as the tool's failure, so
/// each message names the tool, says what was wrong and what to do instead.
///
/// Match on the variant to tell the kinds apart; [`ToolError::kind`] gives a stable
/// snake_case name for logs and wire formats.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ToolError {
    /// No tool of that name is registered.
    #[error("unknown tool \"{name}\": no tool of that name is registered; call one of the tools you were offered")]
    UnknownTool {
        /// The name the call asked for.
        name: String,
    },
    /// The arguments are not a JSON object, a required field is missing, or a field has
    /// the wrong type or value.
    #[error("{tool}: {message}")]
    InvalidArguments {
        /// The tool called.
        tool: String,
        /// What was wrong, naming the argument (`argument "offset" must be an integer, got string`).
        message: String,
    },
    /// The handler panicked (or the plugin trapped). The registry stays usable.
    #[error("{tool}: the tool crashed: {message}. This is a fault in the tool, not in your call; do not retry the same call, try another approach")]
    ToolPanicked {
        /// The tool called.
        tool: String,
        /// The panic value or trap description.
        message: String,
    },
    /// The call ran past its deadline and was stopped.
    #[error("{tool}: timed out after {} (the per-call time limit) and was stopped; ask for less work per call or try another approach", format_duration(*limit))]
    TimedOut {
        /// The tool called.
        tool: String,
        /// The time limit that applied.
        limit: Duration,
    },
    /// The call was cancelled by the caller before it finished.
    #[error("{tool}: the call was cancelled before it finished")]
    Cancelled {
        /// The tool called.
        tool: String,
    },
    /// The result does not follow the output schema the tool declares (see
    /// [`check_output`](super::check_output)): a fault in the tool, as a crash is.
    #[error("{tool}: the tool's result does not match the output schema it declares ({message}). This is a fault in the tool, not in your call; do not retry the same call, try another approach")]
    InvalidOutput {
        /// The tool called.
        tool: String,
        /// What does not match, naming the property.
        message: String,
    },
    /// The result's JSON encoding is larger than the registry's result cap.
    #[error("{tool}: the result is {size} bytes as JSON, over the {cap}-byte limit for one tool result; ask for less (a smaller range, a narrower pattern or path)")]
    ResultTooLarge {
        /// The tool called.
        tool: String,
        /// Size of the encoded result in bytes.
        size: usize,
        /// The cap in bytes.
        cap: usize,
    },
    /// The tool hit a resource limit other than time (a plugin's memory cap, its fuel,
    /// its output size).
    #[error("{tool}: stopped at the {limit} limit: {message}")]
    LimitExceeded {
        /// The tool called.
        tool: String,
        /// Which limit, with its value: shown as `memory (64 MiB)`.
        limit: Limit,
        /// What happened.
        message: String,
    },
    /// A file would be, or is, larger than the tool's file size cap (`max_file_bytes`
    /// for a write, an edit or a move; the read cap for read_file).
    #[error("{tool}: \"{path}\" at {size} bytes is over this tool's file size limit of {limit} bytes; nothing was changed. Write less or split the content over several files; a file this large cannot be read or edited by this tool")]
    FileTooLarge {
        /// The tool called.
        tool: String,
        /// The file's path.
        path: String,
        /// The size it would have had, or has.
        size: u64,
        /// The cap in bytes.
        limit: u64,
    },
    /// The caller's quota refused the call (a server's per-principal policy): the call
    /// did not run, or, for a write over the bytes quota, wrote nothing. A server answers
    /// it as a protocol error naming the quota (MCP: JSON-RPC error -32029 with the
    /// quota, its limit and when it frees up), not as a tool result.
    #[error("{tool}: {message}")]
    QuotaExceeded {
        /// The tool called.
        tool: String,
        /// Which quota (`calls_per_minute`, `concurrent_calls`, `bytes_written_per_day`,
        /// `http_requests_per_minute`).
        quota: String,
        /// Its limit.
        limit: u64,
        /// In how many seconds it frees up (at least 1).
        retry_after_secs: u64,
        /// What the caller reads: the quota, its limit and when it frees up.
        message: String,
    },
    /// The tool ran and failed; the message is the tool's own.
    #[error("{tool}: {message}")]
    Failed {
        /// The tool called.
        tool: String,
        /// The tool's message for the model.
        message: String,
    },
}

impl ToolError {
    /// A handler failure; dispatch fills in the tool name.
    pub fn failed(message: impl Into<String>) -> Self {
        Self::Failed {
            tool: String::new(),
            message: message.into(),
        }
    }

    /// An argument error; dispatch fills in the tool name.
    pub fn invalid_arguments(message: impl Into<String>) -> Self {
        Self::InvalidArguments {
            tool: String::new(),
            message: message.into(),
        }
    }

    /// A stable snake_case name of the kind, for logs and wire formats.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::UnknownTool { .. } => "unknown_tool",
            Self::InvalidArguments { .. } => "invalid_arguments",
            Self::ToolPanicked { .. } => "tool_panicked",
            Self::TimedOut { .. } => "timed_out",
            Self::Cancelled { .. } => "cancelled",
            Self::ResultTooLarge { .. } => "result_too_large",
            Self::LimitExceeded { .. } => "limit_exceeded",
            Self::FileTooLarge { .. } => "file_too_large",
            Self::Failed { .. } => "failed",
            Self::QuotaExceeded { .. } => "quota_exceeded",
            Self::InvalidOutput { .. } => "invalid_output",
        }
    }

    /// The tool this error is about.
    pub fn tool(&self) -> &str {
        match self {
            Self::UnknownTool { name } => name,
            Self::InvalidArguments { tool, .. }
            | Self::ToolPanicked { tool, .. }
            | Self::TimedOut { tool, .. }
            | Self::Cancelled { tool }
            | Self::ResultTooLarge { tool, .. }
            | Self::LimitExceeded { tool, .. }
            | Self::FileTooLarge { tool, .. }
            | Self::Failed { tool, .. }
            | Self::QuotaExceeded { tool, .. }
            | Self::InvalidOutput { tool, .. } => tool,
        }
    }

    /// Sets the tool name where the error does not carry one yet.
    pub fn with_tool(mut self, name: &str) -> Self {
        match &mut self {
            Self::UnknownTool { .. } => {}
            Self::InvalidArguments { tool, .. }
            | Self::ToolPanicked { tool, .. }
            | Self::TimedOut { tool, .. }
            | Self::Cancelled { tool }
            | Self::ResultTooLarge { tool, .. }
            | Self::LimitExceeded { tool, .. }
            | Self::FileTooLarge { tool, .. }
            | Self::Failed { tool, .. }
            | Self::QuotaExceeded { tool, .. }
            | Self::InvalidOutput { tool, .. } => {
                if tool.is_empty() {
                    name.clone_into(tool);
                }
            }
        }
        self
    }
}

/// A resource limit a call ran into, with its value: what
/// [`ToolError::LimitExceeded`] carries, so a caller can match which limit it was.
///
/// ```
/// use toolhost::registry::Limit;
///
/// assert_eq!(Limit::Memory { bytes: 64 << 20 }.to_string(), "memory (64 MiB)");
/// assert_eq!(Limit::Fuel { units: 100_000 }.to_string(), "fuel (100000)");
/// assert_eq!(Limit::ConcurrentInstances.to_string(), "concurrent plugin instances");
/// assert_eq!(Limit::ConcurrentWalks { walkers: 2 }.to_string(), "concurrent file walks (2)");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Limit {
    /// The memory one instance may grow to, in bytes.
    Memory {
        /// The cap.
        bytes: u64,
    },
    /// The fuel one call may burn (roughly, WebAssembly instructions).
    Fuel {
        /// The fuel the call had.
        units: u64,
    },
    /// The result text one call may return, in bytes.
    Output {
        /// The cap.
        bytes: u64,
    },
    /// The host handles (pollables, streams) one call may hold at once.
    Handles {
        /// The cap.
        count: u64,
    },
    /// Plugin instances running at once, host-wide: the pool was full.
    ConcurrentInstances,
    /// File walks (`list_files`, `glob`, `grep`) running at once, process-wide: every
    /// walker was busy and the wait queue full, or the call waited too long for one.
    ConcurrentWalks {
        /// Walks that may run at once.
        walkers: u64,
    },
}

impl std::fmt::Display for Limit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Limit::Memory { bytes } => write!(f, "memory ({})", format_bytes(*bytes)),
            Limit::Fuel { units } => write!(f, "fuel ({units})"),
            Limit::Output { bytes } => write!(f, "output ({})", format_bytes(*bytes)),
            Limit::Handles { count } => write!(f, "host handles ({count})"),
            Limit::ConcurrentInstances => f.write_str("concurrent plugin instances"),
            Limit::ConcurrentWalks { walkers } => write!(f, "concurrent file walks ({walkers})"),
        }
    }
}

/// Why a tool could not be registered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RegisterError {
    /// The definition has an empty name.
    #[error("a tool needs a name; the definition's name is empty")]
    EmptyName,
    /// The name has characters or a length MCP clients refuse.
    #[error(
        "tool name \"{name}\" is not valid: use 1 to 128 characters of a-z, A-Z, 0-9, _ and -"
    )]
    InvalidName {
        /// The refused name.
        name: String,
    },
    /// No handler was given.
    #[error("tool \"{name}\" has no handler")]
    MissingHandler {
        /// The tool's name.
        name: String,
    },
    /// A tool of that name is already registered.
    #[error("a tool named \"{name}\" is already registered")]
    DuplicateTool {
        /// The taken name.
        name: String,
    },
    /// The name, or a look-alike of it, belongs to one of the host's built-in tools
    /// ([`RESERVED_TOOL_NAMES`](super::RESERVED_TOOL_NAMES)); only
    /// [`Registry::register_builtin`](super::Registry::register_builtin) may take it, and
    /// it stays reserved when that tool is turned off.
    #[error("tool name \"{name}\" is reserved for the host's built-in tool \"{builtin}\" (names are compared ignoring case, - and _; the name stays reserved when that tool is turned off); choose a clearly different name")]
    Reserved {
        /// The refused name.
        name: String,
        /// The built-in tool's name it is (or looks like).
        builtin: String,
    },
    /// The name differs from a registered tool's only in case, `-` or `_`
    /// ([`name_key`](super::name_key)), so a model could take one for the other.
    #[error("tool name \"{name}\" looks like the registered tool \"{existing}\" (names are compared ignoring case, - and _, so a model could take one for the other); choose a clearly different name")]
    LookAlike {
        /// The refused name.
        name: String,
        /// The registered tool it looks like.
        existing: String,
    },
    /// The title is blank, longer than
    /// [`MAX_TITLE_CHARS`](super::MAX_TITLE_CHARS), or holds control characters.
    #[error(
        "tool \"{name}\": the title is not valid: {problem}; use 1 to 100 characters on one line"
    )]
    InvalidTitle {
        /// The tool's name.
        name: String,
        /// What is wrong with the title.
        problem: String,
    },
    /// A tool from outside the host has a title that reads like a built-in tool's name or
    /// title ([`RESERVED_TOOL_TITLES`](super::RESERVED_TOOL_TITLES)).
    #[error("tool \"{name}\": the title \"{title}\" reads like the host's built-in tool \"{builtin}\" (titles are compared by their letters and digits only); choose a title that says what this tool does")]
    ReservedTitle {
        /// The tool's name.
        name: String,
        /// The refused title.
        title: String,
        /// The built-in tool it reads like.
        builtin: String,
    },
    /// The title reads like a registered tool's name or title ([`title_key`](super::title_key)).
    #[error("tool \"{name}\": the title \"{title}\" reads like the registered tool \"{existing}\" (its name or title; titles are compared by their letters and digits only); choose a clearly different title")]
    TitleLookAlike {
        /// The tool's name.
        name: String,
        /// The refused title.
        title: String,
        /// The registered tool it reads like.
        existing: String,
    },
    /// The name reads like a registered tool's title.
    #[error("tool name \"{name}\" reads like the title \"{title}\" of the registered tool \"{existing}\"; choose a clearly different name")]
    NameLooksLikeTitle {
        /// The refused name.
        name: String,
        /// The registered tool.
        existing: String,
        /// Its title.
        title: String,
    },
    /// The output schema is not an object schema (`"type": "object"`).
    #[error("tool \"{name}\": the output schema is not valid: {problem}; MCP gives structured results as objects, so declare {{\"type\": \"object\", \"properties\": ...}} or no output schema")]
    InvalidOutputSchema {
        /// The tool's name.
        name: String,
        /// What is wrong with the schema.
        problem: String,
    },
    /// [`Registry::replace_all`](super::Registry::replace_all) was asked to take away a
    /// tool that is not registered, or one of the host's own tools (which never change
    /// while the host runs).
    #[error("tool \"{name}\" cannot be replaced or removed: it is not registered, or it is one of the host's built-in tools; only tools added with register, register_shared or register_all can be")]
    NotRemovable {
        /// The tool's name.
        name: String,
    },
}

impl RegisterError {
    /// The refused name (`None` for [`RegisterError::EmptyName`]).
    pub fn name(&self) -> Option<&str> {
        match self {
            Self::EmptyName => None,
            Self::InvalidName { name }
            | Self::MissingHandler { name }
            | Self::DuplicateTool { name }
            | Self::Reserved { name, .. }
            | Self::LookAlike { name, .. }
            | Self::InvalidTitle { name, .. }
            | Self::ReservedTitle { name, .. }
            | Self::TitleLookAlike { name, .. }
            | Self::NameLooksLikeTitle { name, .. }
            | Self::InvalidOutputSchema { name, .. }
            | Self::NotRemovable { name } => Some(name),
        }
    }
}

/// `30s`, `1500ms`, `250ms`: a duration exactly, in the syntax the command line takes.
///
/// The one format of every duration in a message of this workspace (limits, timeouts,
/// waits), for people and for models alike:
/// - exact: whole seconds as seconds, anything else in milliseconds, never rounded, so a
///   limit of 1250ms is not shown as "1.2s" or "1.3s" and two limits that differ never
///   read the same;
/// - what the flags take (`--timeout`, `--plugin-max-timeout`, `--registry-deadline`:
///   whole numbers with `ms` or `s`), so a message that says "raise --timeout" shows a
///   value that can be copied into it;
/// - `s` and `ms` only: no `m`, which reads as "milli" as often as "minutes" (a 10-minute
///   deadline is `600s`).
///
/// A duration finer than a millisecond (none comes from a flag or a manifest) is written
/// as [`Duration`]'s `Debug` does (`500µs`, `1.0005s`), still exactly.
///
/// ```
/// use std::time::Duration;
/// use toolhost::registry::format_duration;
///
/// assert_eq!(format_duration(Duration::from_secs(30)), "30s");
/// assert_eq!(format_duration(Duration::from_secs(600)), "600s");
/// assert_eq!(format_duration(Duration::from_millis(1500)), "1500ms");
/// assert_eq!(format_duration(Duration::from_millis(250)), "250ms");
/// assert_eq!(format_duration(Duration::ZERO), "0ms");
/// ```
pub fn format_duration(duration: Duration) -> String {
    if !duration.subsec_nanos().is_multiple_of(1_000_000) {
        format!("{duration:?}")
    } else if duration.subsec_nanos() == 0 && !duration.is_zero() {
        format!("{}s", duration.as_secs())
    } else {
        format!("{}ms", duration.as_millis())
    }
}

/// `64 MiB`, `1.5 KiB`, `512 bytes`: a size as a person writes it, in binary units up to
/// EiB, with one decimal where it is not a whole number of its unit. The one format of
/// every size in a message of this workspace.
///
/// ```
/// use toolhost::registry::format_bytes;
///
/// assert_eq!(format_bytes(64 << 20), "64 MiB");
/// assert_eq!(format_bytes(1536), "1.5 KiB");
/// assert_eq!(format_bytes(512), "512 bytes");
/// assert_eq!(format_bytes(3 << 40), "3 TiB");
/// ```
pub fn format_bytes(bytes: u64) -> String {
    const UNITS: [(&str, u64); 6] = [
        ("EiB", 1 << 60),
        ("PiB", 1 << 50),
        ("TiB", 1 << 40),
        ("GiB", 1 << 30),
        ("MiB", 1 << 20),
        ("KiB", 1 << 10),
    ];
    for (unit, size) in UNITS {
        if bytes >= size {
            return if bytes.is_multiple_of(size) {
                format!("{} {unit}", bytes / size)
            } else {
                format!("{:.1} {unit}", bytes as f64 / size as f64)
            };
        }
    }
    format!("{bytes} bytes")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn with_tool_fills_only_empty_names() {
        let err = ToolError::failed("disk full").with_tool("write_file");
        assert_eq!(err.to_string(), "write_file: disk full");
        let err = err.with_tool("other");
        assert_eq!(err.tool(), "write_file");
    }

    #[test]
    fn limits_are_data_and_show_their_value() {
        let err = ToolError::LimitExceeded {
            tool: "t".into(),
            limit: Limit::Output { bytes: 1 << 20 },
            message: "too much".into(),
        };
        assert_eq!(
            err.to_string(),
            "t: stopped at the output (1 MiB) limit: too much"
        );
        assert!(matches!(
            err,
            ToolError::LimitExceeded {
                limit: Limit::Output { bytes: 1_048_576 },
                ..
            }
        ));
        assert_eq!(Limit::Handles { count: 8 }.to_string(), "host handles (8)");
    }

    #[test]
    fn timed_out_names_tool_and_limit() {
        let err = ToolError::TimedOut {
            tool: "slow".into(),
            limit: Duration::from_millis(1500),
        };
        assert!(err.to_string().starts_with("slow: timed out after 1500ms"));
    }

    #[test]
    fn durations_are_exact_and_read_back_by_the_flags() {
        let cases = [
            (Duration::ZERO, "0ms"),
            (Duration::from_millis(1), "1ms"),
            (Duration::from_millis(999), "999ms"),
            (Duration::from_secs(1), "1s"),
            (Duration::from_millis(1250), "1250ms"),
            (Duration::from_millis(1500), "1500ms"),
            (Duration::from_secs(90), "90s"),
            (Duration::from_secs(600), "600s"),
            (Duration::from_micros(500), "500µs"),
            (Duration::from_micros(1_000_500), "1.0005s"),
        ];
        for (duration, text) in cases {
            assert_eq!(format_duration(duration), text, "{duration:?}");
        }
    }

    #[test]
    fn sizes_read_well_up_to_the_largest() {
        assert_eq!(format_bytes(0), "0 bytes");
        assert_eq!(format_bytes(1023), "1023 bytes");
        assert_eq!(format_bytes(1024), "1 KiB");
        assert_eq!(format_bytes(1536), "1.5 KiB");
        assert_eq!(format_bytes(64 << 20), "64 MiB");
        assert_eq!(format_bytes(2 << 40), "2 TiB");
        assert_eq!(format_bytes(u64::MAX), "16.0 EiB");
    }
}
