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

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

/// Most keys one manifest may declare.
pub const MAX_CONFIG_KEYS: usize = 64;
/// Largest configuration value (64 KiB): tokens and settings are short; the cap bounds
/// what every call's environment copies.
pub const MAX_CONFIG_VALUE_BYTES: usize = 64 * 1024;
/// Longest key name.
pub const MAX_CONFIG_KEY_BYTES: usize = 128;
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
    /// A plugin or key name breaks the naming rule.
    #[error("{what} \"{name}\" is not a valid name: {reason}")]
    BadName {
        /// `plugin name` or `config key`.
        what: &'static str,
        /// The name.
        name: String,
        /// The rule.
        reason: &'static str,
    },
    /// A value is over [`MAX_CONFIG_VALUE_BYTES`] or holds a NUL byte.
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

/// A value the operator gives a plugin. Its `Debug` never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct ConfigValue(String);

impl ConfigValue {
    /// The value.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ConfigValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ConfigValue({} bytes)", self.0.len())
    }
}

/// The values the operator set: plugin name → key → value. Empty by default (no plugin
/// gets any configuration).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct ConfigValues {
    values: BTreeMap<String, BTreeMap<String, ConfigValue>>,
}

impl fmt::Debug for ConfigValues {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Keys only: even a non-secret value's secrecy is the manifest's to say.
        let keys: BTreeMap<&str, Vec<&str>> = self
            .values
            .iter()
            .map(|(plugin, keys)| (plugin.as_str(), keys.keys().map(String::as_str).collect()))
            .collect();
        f.debug_struct("ConfigValues").field("keys", &keys).finish()
    }
}

/// Checks a key name: 1 to [`MAX_CONFIG_KEY_BYTES`] of `A-Z a-z 0-9 _`, not starting
/// with a digit (an environment variable name, so every toolchain can read it).
///
/// # Errors
/// [`ConfigError::BadName`].
pub fn check_key(key: &str) -> Result<(), ConfigError> {
    let bad = |reason| ConfigError::BadName {
        what: "config key",
        name: key.escape_debug().to_string(),
        reason,
    };
    if key.is_empty() || key.len() > MAX_CONFIG_KEY_BYTES {
        return Err(bad("give 1 to 128 characters"));
    }
    if key.starts_with(|c: char| c.is_ascii_digit())
        || !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    {
        return Err(bad(
            "use letters, digits and _, not starting with a digit (like an environment variable, e.g. GITHUB_TOKEN)",
        ));
    }
    Ok(())
}

fn check_plugin(name: &str) -> Result<(), ConfigError> {
    if name.is_empty()
        || name.len() > 255
        || name.contains(['/', '\\', '\0'])
        || name.starts_with('.')
    {
        return Err(ConfigError::BadName {
            what: "plugin name",
            name: name.escape_debug().to_string(),
            reason: "give the plugin's file name without .wasm",
        });
    }
    Ok(())
}

fn check_value(plugin: &str, key: &str, value: &str) -> Result<(), ConfigError> {
    let bad = |reason: String| ConfigError::BadValue {
        plugin: plugin.to_owned(),
        key: key.to_owned(),
        reason,
    };
    if value.len() > MAX_CONFIG_VALUE_BYTES {
        return Err(bad(format!(
            "is {} bytes, over the cap of {MAX_CONFIG_VALUE_BYTES}",
            value.len()
        )));
    }
    if value.contains('\0') {
        return Err(bad(
            "holds a NUL byte, which no environment variable may".into()
        ));
    }
    Ok(())
}

impl ConfigValues {
    /// Sets `plugin`'s `key` to `value`, replacing an earlier value.
    ///
    /// # Errors
    /// [`ConfigError::BadName`] or [`ConfigError::BadValue`].
    pub fn set(&mut self, plugin: &str, key: &str, value: String) -> Result<(), ConfigError> {
        check_plugin(plugin)?;
        check_key(key)?;
        check_value(plugin, key, &value)?;
        self.values
            .entry(plugin.to_owned())
            .or_default()
            .insert(key.to_owned(), ConfigValue(value));
        Ok(())
    }

    /// Splits `NAME.KEY=REST` into `(NAME, KEY, REST)`. Errors show only `NAME.KEY`.
    fn split(text: &str) -> Result<(&str, &str, &str), ConfigError> {
        let Some((target, rest)) = text.split_once('=') else {
            return Err(ConfigError::BadAssignment {
                given: format!("{}…", text.chars().take(40).collect::<String>()),
                reason: "there is no `=`; write e.g. greet.API_TOKEN=...".into(),
            });
        };
        let Some((plugin, key)) = target.rsplit_once('.') else {
            return Err(ConfigError::BadAssignment {
                given: format!("{target}=…"),
                reason:
                    "before the `=` give the plugin's name, a dot and the key, e.g. greet.API_TOKEN"
                        .into(),
            });
        };
        Ok((plugin, key, rest))
    }

    /// Applies `NAME.KEY=VALUE` (the CLI's `--plugin-config`).
    ///
    /// # Errors
    /// [`ConfigError::BadAssignment`] when the text is not of that form; as
    /// [`ConfigValues::set`]. No error repeats the value.
    pub fn set_assignment(&mut self, text: &str) -> Result<(), ConfigError> {
        let (plugin, key, value) = Self::split(text)?;
        self.set(plugin, key, value.to_owned())
    }

    /// Applies `NAME.KEY=ENV_VAR` (the CLI's `--plugin-config-env`): the value of the
    /// host's environment variable `ENV_VAR` (`NAME.KEY` alone reads `KEY`), read through
    /// `env` (`std::env::var` in the CLI).
    ///
    /// # Errors
    /// [`ConfigError::MissingEnv`] when the variable is not set; as
    /// [`ConfigValues::set_assignment`].
    pub fn set_from_env(
        &mut self,
        text: &str,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<(), ConfigError> {
        let (plugin, key, var) = match text.split_once('=') {
            Some(_) => Self::split(text)?,
            None => match text.rsplit_once('.') {
                Some((plugin, key)) => (plugin, key, key),
                None => {
                    return Err(ConfigError::BadAssignment {
                        given: text.to_owned(),
                        reason: "give NAME.KEY or NAME.KEY=ENV_VAR, e.g. greet.API_TOKEN=MY_TOKEN"
                            .into(),
                    })
                }
            },
        };
        check_plugin(plugin)?;
        check_key(key)?;
        let value = env(var).ok_or_else(|| ConfigError::MissingEnv {
            plugin: plugin.to_owned(),
            key: key.to_owned(),
            var: var.to_owned(),
        })?;
        self.set(plugin, key, value)
    }

    /// Parses a configuration file (the CLI's `--plugin-config-file`) and applies it:
    ///
    /// ```toml
    /// [github_issues]                          # the plugin's name
    /// REPO = "octo/hello"                      # a value
    /// GITHUB_TOKEN = { env = "GITHUB_TOKEN" }  # from the host's environment
    /// ```
    ///
    /// # Errors
    /// [`ConfigError::File`] when the text is not such a file (the message names the
    /// line and never quotes a value); as [`ConfigValues::set`] and
    /// [`ConfigValues::set_from_env`].
    pub fn apply_file_text(
        &mut self,
        path: &Path,
        text: &str,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<(), ConfigError> {
        let file_error = |message: String| ConfigError::File {
            path: path.to_owned(),
            message,
        };
        let table: toml::Table = toml::from_str(text).map_err(|err| {
            // toml's message quotes the offending text, which may be a secret: keep only
            // the line number.
            let line = err.span().map_or(0, |span| {
                text.as_bytes()[..span.start.min(text.len())]
                    .iter()
                    .filter(|&&b| b == b'\n')
                    .count()
                    + 1
            });
            file_error(format!("not valid TOML at line {line}; write one [PLUGIN] table of KEY = \"value\" or KEY = {{ env = \"VAR\" }} lines per plugin"))
        })?;
        for (plugin, keys) in table {
            let toml::Value::Table(keys) = keys else {
                return Err(file_error(format!(
                    "\"{plugin}\" is not a table; write [{plugin}] and its KEY = \"value\" lines under it"
                )));
            };
            for (key, value) in keys {
                match value {
                    toml::Value::String(value) => self.set(&plugin, &key, value)?,
                    toml::Value::Table(source) => {
                        let var = match (source.len(), source.get("env")) {
                            (1, Some(toml::Value::String(var))) => var.clone(),
                            _ => {
                                return Err(file_error(format!(
                                    "{plugin}.{key}: a table value must be {{ env = \"VAR\" }}"
                                )))
                            }
                        };
                        self.set_from_env(&format!("{plugin}.{key}={var}"), &env)?;
                    }
                    _ => {
                        return Err(file_error(format!(
                            "{plugin}.{key}: give a string (\"...\") or {{ env = \"VAR\" }}"
                        )))
                    }
                }
            }
        }
        Ok(())
    }

    /// Reads and applies the configuration file at `path` (see
    /// [`ConfigValues::apply_file_text`]).
    ///
    /// # Errors
    /// As [`ConfigValues::apply_file_text`], and [`ConfigError::File`] when the file
    /// cannot be read.
    pub fn parse_file(
        &mut self,
        path: &Path,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<(), ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|err| ConfigError::File {
            path: path.to_owned(),
            message: format!("cannot read it: {err}"),
        })?;
        self.apply_file_text(path, &text, env)
    }

    /// The value of `plugin`'s `key`.
    pub fn get(&self, plugin: &str, key: &str) -> Option<&ConfigValue> {
        self.values.get(plugin)?.get(key)
    }

    /// The keys set for `plugin`, sorted.
    pub fn keys(&self, plugin: &str) -> Vec<&str> {
        self.values
            .get(plugin)
            .map(|keys| keys.keys().map(String::as_str).collect())
            .unwrap_or_default()
    }

    /// Whether no value is set for any plugin.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }
}

/// A key a manifest declares in `[config]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigKey {
    /// The key (an environment-variable-like name).
    pub name: String,
    /// What it is for, for the operator.
    pub description: Option<String>,
    /// Whether the value is a secret (kept out of logs and errors, never shown).
    pub secret: bool,
    /// Whether the plugin needs it to load (default `true`).
    pub required: bool,
}

/// One key of a [`PluginConfig`].
#[derive(Clone, PartialEq, Eq)]
pub struct ConfigEntry {
    /// The declaration.
    pub key: ConfigKey,
    /// The operator's value (`None` for an optional key without one).
    pub value: Option<ConfigValue>,
}

impl fmt::Debug for ConfigEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConfigEntry")
            .field("key", &self.key)
            .field("set", &self.value.is_some())
            .finish()
    }
}

/// What one plugin gets: its declared keys, each with the operator's value if any.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PluginConfig {
    entries: Vec<ConfigEntry>,
}

impl PluginConfig {
    /// Resolves `declared` keys against the operator's `values` for `plugin`.
    ///
    /// Returns the config and the keys the operator set that the manifest does not
    /// declare (ignored; the caller warns about them, naming them, never their values).
    ///
    /// # Errors
    /// With `require`, the first required key without a value.
    pub fn resolve(
        plugin: &str,
        declared: &[ConfigKey],
        values: &ConfigValues,
        require: bool,
    ) -> Result<(Self, Vec<String>), ConfigKey> {
        let mut entries = Vec::with_capacity(declared.len());
        for key in declared {
            let value = values.get(plugin, &key.name).cloned();
            if value.is_none() && key.required && require {
                return Err(key.clone());
            }
            entries.push(ConfigEntry {
                key: key.clone(),
                value,
            });
        }
        let undeclared = values
            .keys(plugin)
            .into_iter()
            .filter(|set| !declared.iter().any(|key| key.name == *set))
            .map(str::to_owned)
            .collect();
        Ok((Self { entries }, undeclared))
    }

    /// The declared keys, sorted by name.
    pub fn entries(&self) -> &[ConfigEntry] {
        &self.entries
    }

    /// The value of `key`, if declared and set.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.entries
            .iter()
            .find(|entry| entry.key.name == key)
            .and_then(|entry| entry.value.as_ref())
            .map(ConfigValue::expose)
    }

    /// The keys that have a value, sorted.
    pub fn keys(&self) -> Vec<String> {
        let mut keys: Vec<String> = self
            .entries
            .iter()
            .filter(|entry| entry.value.is_some())
            .map(|entry| entry.key.name.clone())
            .collect();
        keys.sort();
        keys
    }

    /// `(key, value)` of every key that has a value: the plugin's environment.
    pub fn env(&self) -> impl Iterator<Item = (&str, &str)> {
        self.entries.iter().filter_map(|entry| {
            entry
                .value
                .as_ref()
                .map(|value| (entry.key.name.as_str(), value.expose()))
        })
    }

    /// The redactor of this plugin's secret values.
    pub fn redactor(&self) -> Redactor {
        Redactor::new(
            self.entries
                .iter()
                .filter(|entry| entry.key.secret)
                .filter_map(|entry| entry.value.as_ref())
                .map(|value| value.expose().to_owned()),
        )
    }
}

/// Replaces secret values by [`REDACTED`] in text bound for a log or an error.
///
/// ```
/// use toolhost_plugin::Redactor;
///
/// let redactor = Redactor::new(["s3cr3t".to_owned()]);
/// assert_eq!(redactor.redact("token=s3cr3t&x=1"), "token=[REDACTED]&x=1");
/// assert_eq!(redactor.redact("nothing here"), "nothing here");
/// ```
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Redactor {
    /// Longest first, so a secret that contains another is replaced whole.
    secrets: Vec<String>,
}

impl fmt::Debug for Redactor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Redactor({} secrets)", self.secrets.len())
    }
}

impl Redactor {
    /// A redactor of `secrets` (empty ones are ignored).
    pub fn new(secrets: impl IntoIterator<Item = String>) -> Self {
        let mut secrets: Vec<String> = secrets.into_iter().filter(|s| !s.is_empty()).collect();
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        secrets.dedup();
        Self { secrets }
    }

    /// Whether there is nothing to redact.
    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    /// `text` with every secret replaced by [`REDACTED`].
    pub fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut out = Cow::Borrowed(text);
        for secret in &self.secrets {
            if out.contains(secret.as_str()) {
                out = Cow::Owned(out.replace(secret.as_str(), REDACTED));
            }
        }
        out
    }

    /// `text` redacted, when it is the tail of a longer output whose start was dropped:
    /// a secret cut by the drop would leave its end at the start of `text`, so the cut
    /// first line is removed too.
    pub fn redact_tail<'a>(&self, text: &'a str, cut: bool) -> Cow<'a, str> {
        if !cut || self.is_empty() {
            return self.redact(text);
        }
        let rest = text.split_once('\n').map_or("", |(_, rest)| rest);
        Cow::Owned(self.redact(rest).into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn assignments_parse_and_errors_never_repeat_the_value() {
        let mut values = ConfigValues::default();
        values.set_assignment("gh.TOKEN=a=b.c").unwrap();
        assert_eq!(values.get("gh", "TOKEN").unwrap().expose(), "a=b.c");
        values.set_assignment("my.plugin.KEY=v").unwrap();
        assert_eq!(values.get("my.plugin", "KEY").unwrap().expose(), "v");
        let err = values.set_assignment("ghTOKEN=hunter2").unwrap_err();
        assert_eq!(
            err.to_string(),
            "\"ghTOKEN=…\" is not NAME.KEY=VALUE: before the `=` give the plugin's name, a dot and the key, e.g. greet.API_TOKEN"
        );
        let err = values.set_assignment("hunter2").unwrap_err();
        assert!(matches!(err, ConfigError::BadAssignment { .. }));
        let err = values.set_assignment("gh.bad-key=hunter2").unwrap_err();
        assert!(
            matches!(
                err,
                ConfigError::BadName {
                    what: "config key",
                    ..
                }
            ),
            "{err}"
        );
        assert!(!err.to_string().contains("hunter2"));
        let err = values.set_assignment("gh.K=a\0b").unwrap_err();
        assert_eq!(
            err.to_string(),
            "the value of gh.K holds a NUL byte, which no environment variable may"
        );
        let big = format!("gh.K={}", "x".repeat(MAX_CONFIG_VALUE_BYTES + 1));
        assert!(matches!(
            values.set_assignment(&big),
            Err(ConfigError::BadValue { .. })
        ));
        assert!(!format!("{values:?}").contains("a=b.c"));
    }

    #[test]
    fn env_values_only_when_named() {
        let env = |var: &str| (var == "MY_TOKEN").then(|| "from-env".to_owned());
        let mut values = ConfigValues::default();
        values.set_from_env("gh.TOKEN=MY_TOKEN", env).unwrap();
        assert_eq!(values.get("gh", "TOKEN").unwrap().expose(), "from-env");
        let err = values.set_from_env("gh.OTHER", env).unwrap_err();
        assert_eq!(
            err,
            ConfigError::MissingEnv {
                plugin: "gh".into(),
                key: "OTHER".into(),
                var: "OTHER".into()
            }
        );
    }

    #[test]
    fn files_parse_with_env_sources_and_errors_keep_values_out() {
        let env = |var: &str| (var == "GH").then(|| "tok".to_owned());
        let mut values = ConfigValues::default();
        values
            .apply_file_text(
                Path::new("c.toml"),
                "[gh]\nREPO = \"octo/hello\"\nTOKEN = { env = \"GH\" }\n",
                env,
            )
            .unwrap();
        assert_eq!(values.get("gh", "REPO").unwrap().expose(), "octo/hello");
        assert_eq!(values.get("gh", "TOKEN").unwrap().expose(), "tok");
        let err = values
            .apply_file_text(Path::new("c.toml"), "[gh]\nTOKEN = \"hunter2\n", no_env)
            .unwrap_err();
        assert_eq!(err.to_string(), "c.toml: not valid TOML at line 2; write one [PLUGIN] table of KEY = \"value\" or KEY = { env = \"VAR\" } lines per plugin");
        let err = values
            .apply_file_text(Path::new("c.toml"), "[gh]\nTOKEN = 5\n", no_env)
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "c.toml: gh.TOKEN: give a string (\"...\") or { env = \"VAR\" }"
        );
        let err = values
            .apply_file_text(Path::new("c.toml"), "TOKEN = \"hunter2\"\n", no_env)
            .unwrap_err();
        assert!(!err.to_string().contains("hunter2"), "{err}");
    }

    fn key(name: &str, secret: bool, required: bool) -> ConfigKey {
        ConfigKey {
            name: name.into(),
            description: None,
            secret,
            required,
        }
    }

    #[test]
    fn a_plugin_gets_exactly_its_declared_keys() {
        let mut values = ConfigValues::default();
        values.set_assignment("gh.TOKEN=t0k3n").unwrap();
        values.set_assignment("gh.TYPO=x").unwrap();
        values.set_assignment("other.TOKEN=not-yours").unwrap();
        let declared = [key("TOKEN", true, true), key("REGION", false, false)];
        let (config, undeclared) = PluginConfig::resolve("gh", &declared, &values, true).unwrap();
        assert_eq!(undeclared, ["TYPO"]);
        assert_eq!(config.get("TOKEN"), Some("t0k3n"));
        assert_eq!(config.get("REGION"), None);
        assert_eq!(config.get("TYPO"), None);
        assert_eq!(config.keys(), ["TOKEN"]);
        assert_eq!(config.env().collect::<Vec<_>>(), [("TOKEN", "t0k3n")]);
        assert!(!format!("{config:?}").contains("t0k3n"));
        let missing =
            PluginConfig::resolve("other", &declared[..1], &ConfigValues::default(), true)
                .unwrap_err();
        assert_eq!(missing.name, "TOKEN");
        let (lenient, _) =
            PluginConfig::resolve("other", &declared[..1], &ConfigValues::default(), false)
                .unwrap();
        assert_eq!(lenient.entries()[0].value, None);
    }

    #[test]
    fn redaction_replaces_every_secret_and_cut_first_lines() {
        let redactor = Redactor::new(["abc".to_owned(), "abcdef".to_owned(), String::new()]);
        assert_eq!(
            redactor.redact("x abcdef y abc"),
            "x [REDACTED] y [REDACTED]"
        );
        assert_eq!(redactor.redact_tail("def\nok abc", true), "ok [REDACTED]");
        assert_eq!(redactor.redact_tail("def\nok", false), "def\nok");
        assert_eq!(Redactor::default().redact_tail("def\nok", true), "def\nok");
    }
}
