//! Per-principal policy for a server shared by several clients: which tools each one is
//! offered, its file access and storage root, ceilings on what its plugins are granted,
//! and its quotas.
//!
//! A *principal* is whoever a bearer token stands for: a static token's name (the
//! token file's `TOKEN NAME`), or an OAuth token's `sub` with its scopes. A policy file
//! (TOML) names *profiles* and maps principals to them; the first `[[principal]]` rule
//! that matches, in file order, wins. A principal no rule matches gets the profile named
//! `default` if there is one, and is refused (HTTP 403) otherwise.
//!
//! ```toml
//! [[principal]]
//! token = "alice"          # a static token's name
//! profile = "editor"
//!
//! [[principal]]
//! scope = "tools:read"     # any OAuth token granting this scope
//! profile = "reader"
//!
//! [profile.editor]
//! tools = ["read_file", "write_file", "list_files"]
//! plugins = ["greet"]
//! files = "read-write"
//! root = "/srv/toolhost/{client}"
//! quota = { calls_per_minute = 120, concurrent_calls = 4, bytes_written_per_day = 10485760 }
//!
//! [profile.reader]
//! files = "read-only"
//! plugin = { http = ["api.example.org"], memory_bytes = 33554432, timeout_ms = 5000 }
//! quota = { calls_per_minute = 30, http_requests_per_minute = 10 }
//! ```
//!
//! [`Policy::parse`] reads and checks one (typed [`PolicyError`]s naming the line);
//! [`LivePolicy`] holds the one in force, swaps it on reload, and keeps each
//! principal's quota state ([`quota`]).
//!
//! ```
//! use toolhost_mcp::policy::{Policy, Principal};
//!
//! let policy = Policy::parse(r#"
//! [[principal]]
//! token = "alice"
//! profile = "editor"
//! [profile.editor]
//! tools = ["read_file"]
//! [profile.default]
//! files = "none"
//! "#).unwrap();
//! assert_eq!(policy.profile_for(&Principal::new(Some("alice"), &[])).unwrap().name(), "editor");
//! assert_eq!(policy.profile_for(&Principal::new(Some("bob"), &[])).unwrap().name(), "default");
//! ```

mod file;
mod live;
pub mod quota;

use std::collections::BTreeMap;
use std::time::Duration;

pub use file::MAX_POLICY_BYTES;
pub use live::{LivePolicy, PolicyRefusal};
pub use quota::{
    Quota, QuotaExceeded, QuotaLimits, QuotasFull, SharedQuotas, SharedRefusal, MAX_PRINCIPALS,
};

/// The most profiles a policy may name: 256.
pub const MAX_PROFILES: usize = 256;
/// The most `[[principal]]` rules a policy may have: 10 000.
pub const MAX_RULES: usize = 10_000;
/// The most names one list of a profile (tools, plugins, HTTP hosts, config keys) may
/// hold: 4096.
pub const MAX_LIST: usize = 4096;
/// The name of the profile a principal no rule matches gets, when the policy has it.
pub const DEFAULT_PROFILE: &str = "default";

/// Why a policy file was refused. Its messages say where (the line, when known) and what
/// to write instead; the policy in force, if any, stays.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyError {
    /// The file could not be read.
    #[error("cannot read the policy file {path}: {reason}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
    /// The file is larger than [`MAX_POLICY_BYTES`].
    #[error("the policy file is {got} bytes; at most {MAX_POLICY_BYTES} (1 MiB) are read: keep it to profiles and rules")]
    TooLarge {
        /// Its size (or the bytes read before giving up).
        got: u64,
    },
    /// The file is not valid TOML, or not the policy's shape.
    #[error("policy line {line}: {problem}")]
    Syntax {
        /// The 1-based line of the problem (0 when the parser gave no place).
        line: usize,
        /// What is wrong.
        problem: String,
    },
    /// A value is out of its bounds or names something that does not exist.
    #[error("policy {place}: {problem}")]
    Invalid {
        /// Where (`profile.editor.quota.calls_per_minute`, `principal 3`).
        place: String,
        /// What is wrong and what to write instead.
        problem: String,
    },
}

/// How much of its storage root a profile's file tools reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FileAccess {
    /// No file tools.
    None,
    /// The tools that read (the writing ones are not offered).
    ReadOnly,
    /// Every file tool the operator's flags allow.
    #[default]
    ReadWrite,
}

/// Ceilings on what a profile's plugins are granted: each only narrows what the
/// operator's flags allow (unset: the flags' value).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PluginCeilings {
    /// The HTTP host patterns its plugins may reach: each must be one the operator
    /// allows (`--plugin-http`); `None`: the operator's.
    pub http: Option<Vec<String>>,
    /// The configuration values (`PLUGIN.KEY`) its plugins are given; the others are
    /// withheld. `None`: all the operator gives.
    pub config: Option<Vec<String>>,
    /// The most memory a plugin instance may have (bytes).
    pub memory_bytes: Option<u64>,
    /// The most wall time of one plugin call.
    pub timeout: Option<Duration>,
}

/// One profile: what the principals mapped to it are offered and allowed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Profile {
    name: String,
    tools: Option<Vec<String>>,
    plugins: Vec<String>,
    files: FileAccess,
    root: Option<String>,
    plugin: PluginCeilings,
    quota: QuotaLimits,
}

impl Profile {
    /// Its name (the `[profile.NAME]` table).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The tools it names (`tools = [...]`); `None` when it names neither tools nor
    /// plugins: then every tool is offered (within [`Profile::files`]).
    pub fn tools(&self) -> Option<&[String]> {
        self.tools.as_deref()
    }

    /// The plugins all of whose tools it offers (`plugins = [...]`).
    pub fn plugins(&self) -> &[String] {
        &self.plugins
    }

    /// Its file access (`files = "none" | "read-only" | "read-write"`, default
    /// read-write).
    pub fn files(&self) -> FileAccess {
        self.files
    }

    /// Its storage root template (`root = "..."`), if it sets one.
    pub fn root(&self) -> Option<&str> {
        self.root.as_deref()
    }

    /// Its plugin ceilings (`plugin = { ... }`).
    pub fn plugin(&self) -> &PluginCeilings {
        &self.plugin
    }

    /// Its quotas (`quota = { ... }`).
    pub fn quota(&self) -> &QuotaLimits {
        &self.quota
    }

    /// Whether it offers tool `tool` of kind `kind`. Without `tools = [...]`: every
    /// file tool its [`FileAccess`] allows, the tools of the plugins it names (of every
    /// plugin when it names none) and the host's other tools. With it: the tools it
    /// lists (a file tool still only within its file access) and the tools of the
    /// plugins it names.
    pub fn offers(&self, tool: &str, kind: ToolKind<'_>) -> bool {
        let listed = || {
            self.tools
                .as_ref()
                .map(|tools| tools.iter().any(|t| t == tool))
        };
        match kind {
            ToolKind::File { writes } => match self.files {
                FileAccess::None => false,
                FileAccess::ReadOnly if writes => false,
                _ => listed().unwrap_or(true),
            },
            ToolKind::Plugin(plugin) => {
                self.plugins.iter().any(|p| p == plugin)
                    || listed().unwrap_or(self.plugins.is_empty())
            }
            ToolKind::Other => listed().unwrap_or(true),
        }
    }
}

/// What a tool is, for [`Profile::offers`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolKind<'a> {
    /// A built-in file tool; `writes` when it changes files.
    File {
        /// Whether it writes (write_file, edit_file, ...).
        writes: bool,
    },
    /// A tool of the plugin so named.
    Plugin(&'a str),
    /// Another tool of the host (the plan tool).
    Other,
}

/// What a rule matches.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Match {
    /// The client's name: a static token's name or an OAuth token's `sub`.
    Client(String),
    /// A scope the token granted.
    Scope(String),
}

/// Who a request comes from, as a policy matches it.
#[derive(Debug, Clone, Copy)]
pub struct Principal<'a> {
    client: Option<&'a str>,
    scopes: &'a [String],
    issuer: Option<&'a str>,
}

impl<'a> Principal<'a> {
    /// The principal of a token named `client` (a static token's name, or an OAuth
    /// `sub`) that granted `scopes` (empty for a static token).
    pub fn new(client: Option<&'a str>, scopes: &'a [String]) -> Self {
        Self {
            client,
            scopes,
            issuer: None,
        }
    }

    /// The same principal, its token issued by `issuer` (an OAuth token's `iss`;
    /// `None` for a static token). Rules match `sub` and scopes whatever the issuer,
    /// but quotas are kept per issuer and `sub`: the same `sub` from two issuers is
    /// two principals.
    pub fn with_issuer(self, issuer: Option<&'a str>) -> Self {
        Self { issuer, ..self }
    }

    /// The client's name (a static token's name or an OAuth `sub`), if any.
    pub fn client(&self) -> Option<&'a str> {
        self.client
    }

    /// The issuer of its OAuth token, if any.
    pub fn issuer(&self) -> Option<&'a str> {
        self.issuer
    }

    /// The key its quotas are kept under: its client name (`-` for none), or for an
    /// OAuth principal its issuer and `sub` joined by NUL (which no client name has,
    /// so the two kinds never share a key).
    pub fn key(&self) -> std::borrow::Cow<'a, str> {
        match (self.issuer, self.client) {
            (Some(issuer), Some(sub)) => std::borrow::Cow::Owned(format!("oauth\0{issuer}\0{sub}")),
            (_, client) => std::borrow::Cow::Borrowed(client.unwrap_or("-")),
        }
    }
}

/// A checked policy: profiles and the rules mapping principals to them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    profiles: BTreeMap<String, Profile>,
    rules: Vec<(Match, String)>,
}

impl Policy {
    /// Parses and checks a policy (TOML, at most [`MAX_POLICY_BYTES`]).
    ///
    /// # Errors
    /// [`PolicyError`]: the file's syntax or shape (with its line), a rule naming a
    /// profile that does not exist, a value out of bounds.
    pub fn parse(text: &str) -> Result<Self, PolicyError> {
        file::parse(text)
    }

    /// Reads and checks the policy file at `path` (at most [`MAX_POLICY_BYTES`] read).
    ///
    /// # Errors
    /// As [`Policy::parse`], and [`PolicyError::Read`] / [`PolicyError::TooLarge`].
    pub fn read(path: &std::path::Path) -> Result<Self, PolicyError> {
        file::read(path)
    }

    /// The profile `principal` gets: the first rule that matches it, in file order,
    /// else the [`DEFAULT_PROFILE`] if there is one; `None`: refused.
    pub fn profile_for(&self, principal: &Principal<'_>) -> Option<&Profile> {
        self.rules
            .iter()
            .find(|(rule, _)| match rule {
                Match::Client(name) => principal.client == Some(name.as_str()),
                Match::Scope(scope) => principal.scopes.iter().any(|s| s == scope),
            })
            .and_then(|(_, profile)| self.profiles.get(profile))
            .or_else(|| self.profiles.get(DEFAULT_PROFILE))
    }

    /// The profile named `name`.
    pub fn profile(&self, name: &str) -> Option<&Profile> {
        self.profiles.get(name)
    }

    /// Every profile, by name.
    pub fn profiles(&self) -> impl Iterator<Item = &Profile> {
        self.profiles.values()
    }

    /// Checks every tool and plugin the profiles name against what the server has:
    /// `tools` (every tool name, built-in or a plugin's) and `plugins` (the plugins'
    /// names).
    ///
    /// # Errors
    /// [`PolicyError::Invalid`] naming the first unknown tool or plugin, and what exists.
    pub fn check_names<'a>(
        &self,
        tools: &[&'a str],
        plugins: &[&'a str],
    ) -> Result<(), PolicyError> {
        for profile in self.profiles.values() {
            for tool in profile.tools.iter().flatten() {
                if !tools.contains(&tool.as_str()) {
                    return Err(PolicyError::Invalid {
                        place: format!("profile.{}.tools", profile.name),
                        problem: format!(
                            "no tool is named {tool:?}; the server has: {}",
                            tools.join(", ")
                        ),
                    });
                }
            }
            for plugin in &profile.plugins {
                if !plugins.contains(&plugin.as_str()) {
                    return Err(PolicyError::Invalid {
                        place: format!("profile.{}.plugins", profile.name),
                        problem: format!(
                            "no plugin is named {plugin:?}; the server has: {}",
                            if plugins.is_empty() {
                                "none".to_owned()
                            } else {
                                plugins.join(", ")
                            }
                        ),
                    });
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
