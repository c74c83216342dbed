//! Plugin configuration and secrets: the keys a manifest declares (`[config]`), the
//! values the operator gives ([`ConfigValues`]), and what one plugin gets
//! ([`PluginConfig`]): exactly its declared keys, through the `config` import and as its
//! environment variables.
//!
//! ```toml
//! # github_issues.toml
//! [config]
//! keys = ["REPO"]                 # short form: required, not secret, no description
//!
//! [config.GITHUB_TOKEN]           # long form
//! description = "A GitHub token that may read issues"
//! secret = true                   # default false
//! required = true                 # default true
//! ```
//!
//! The operator sets values per plugin: `--plugin-config NAME.KEY=VALUE`,
//! `--plugin-config-env NAME.KEY=ENV_VAR` (the host's environment, only when named
//! like this), or a file (`--plugin-config-file FILE`, see [`ConfigValues::parse_file`]).
//! A required key without a value stops the plugin from loading
//! ([`PluginErrorKind::ConfigMissing`](super::PluginErrorKind::ConfigMissing)), naming the key.
//!
//! ```
//! use toolhost_plugin::ConfigValues;
//!
//! let mut values = ConfigValues::default();
//! values.set_assignment("github_issues.GITHUB_TOKEN=ghp_secret")?;
//! assert!(values.get("github_issues", "GITHUB_TOKEN").is_some());
//! // The value never shows in debug output.
//! assert!(!format!("{values:?}").contains("ghp_secret"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Sandbox
//! A plugin sees only the keys its manifest declares: values the operator set for other
//! keys are not given to it (and are named, never shown, in a warning). Secret values
//! never appear in the host's log or in an error: a plugin's log lines, its captured
//! stdout and stderr, and the error messages it returns have every secret value
//! replaced by `[REDACTED]` ([`Redactor`]) before anything reads them; inspecting a
//! plugin shows its keys, never a secret value. The host cannot stop a plugin from
//! putting a secret in its *result* (it holds the secret), so results are not redacted.
//!
//! This file holds the caps and [`ConfigError`]; the operator's values are in `values.rs`,
//! what one plugin gets in `plugin.rs`, redaction in `redact.rs`, all re-exported here.

use std::path::PathBuf;

mod plugin;
mod redact;
#[cfg(test)]
mod tests;
mod values;

pub use plugin::{ConfigEntry, ConfigKey, PluginConfig};
pub use redact::Redactor;
pub use values::{check_key, ConfigValue, ConfigValues};

/// Most keys one manifest may declare.
pub(crate) const MAX_CONFIG_KEYS: usize = 64;
/// Largest configuration value (64 KiB): tokens and settings are short; the cap bounds
/// what every call's environment copies.
pub(crate) const MAX_CONFIG_VALUE_BYTES: usize = 64 * 1024;
/// Longest key name.
pub(crate) const MAX_CONFIG_KEY_BYTES: usize = 128;
/// What replaces a secret value in logs and errors.
pub const REDACTED: &str = "[REDACTED]";

/// Why configuration given by the operator is not valid. Never includes a value.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigError {
    /// `NAME.KEY=VALUE` is not of that form.
    #[error("\"{given}\" is not NAME.KEY=VALUE: {reason}")]
    BadAssignment {
        /// What was given, up to the `=` (the value is never repeated).
        given: String,
        /// What is wrong.
        reason: String,
    },
    /// An operator's `NAME.KEY=VALUE` (or `NAME.KEY=ENV_VAR`) has no `=`. Nothing of it
    /// is shown: a mistyped separator (`NAME.KEY:VALUE`) would otherwise print the value.
    #[error("a configuration assignment of {chars} characters (not shown: it may hold a value) has no `=`; write NAME.KEY=VALUE, e.g. greet.API_TOKEN=..., and give secrets with --plugin-config-env or --plugin-config-file so they stay out of the process list")]
    MissingEquals {
        /// How long the text was, in characters.
        chars: usize,
    },
    /// A plugin or key name the operator gave breaks the naming rule. The name is not
    /// shown: a mistyped separator (`NAME.KEY:VALUE=…`) puts part of a value in it.
    #[error("the {what}{} ({chars} characters, not shown: a mistyped separator may have put part of a value in it) is not a valid name: {reason}", after.as_ref().map(|plugin| format!(" after \"{plugin}.\"")).unwrap_or_default())]
    BadGivenName {
        /// `plugin name` or `config key`.
        what: &'static str,
        /// For a key, the plugin name before it (which passed its own check).
        after: Option<String>,
        /// How long the name was, in characters.
        chars: usize,
        /// The rule.
        reason: &'static str,
    },
    /// A key name in a manifest breaks the naming rule.
    #[error("{what} \"{name}\" is not a valid name: {reason}")]
    BadName {
        /// `plugin name` or `config key`.
        what: &'static str,
        /// The name.
        name: String,
        /// The rule.
        reason: &'static str,
    },
    /// A value is over 64 KiB or holds a NUL byte.
    #[error("the value of {plugin}.{key} {reason}")]
    BadValue {
        /// The plugin.
        plugin: String,
        /// The key.
        key: String,
        /// What is wrong with it (not the value).
        reason: String,
    },
    /// An environment variable named as a source is not set (or not UTF-8).
    #[error("{plugin}.{key} is to come from the environment variable {var}, which is not set (or not UTF-8); export it, or give the value another way")]
    MissingEnv {
        /// The plugin.
        plugin: String,
        /// The key.
        key: String,
        /// The variable.
        var: String,
    },
    /// The configuration file cannot be read or parsed.
    #[error("{}: {message}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// What is wrong (a TOML error names the line; values are never quoted).
        message: String,
    },
}
