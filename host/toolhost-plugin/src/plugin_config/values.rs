//! The values the operator gives ([`ConfigValues`], each a [`ConfigValue`] whose `Debug`
//! never shows it): from `--plugin-config` assignments, the environment and config files,
//! with keys, plugin names and values checked first.

use super::{ConfigError, MAX_CONFIG_KEY_BYTES, MAX_CONFIG_VALUE_BYTES};
use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

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

/// Checks a key name: 1 to 128 bytes of `A-Z a-z 0-9 _`, not starting
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

/// The characters a plugin name given by the operator may not hold: path separators,
/// NUL, and the separators a mistyped `NAME.KEY=VALUE` uses instead of `=` (`:` and
/// white space), so that such a mistake is refused instead of setting a key of a
/// plugin whose name holds part of a value.
fn bad_plugin_char(c: char) -> bool {
    matches!(c, '/' | '\\' | ':' | '=') || c.is_whitespace() || c.is_control()
}

fn check_plugin(name: &str) -> Result<(), ConfigError> {
    if name.is_empty()
        || name.len() > 255
        || name.contains(bad_plugin_char)
        || name.starts_with('.')
    {
        return Err(ConfigError::BadGivenName {
            what: "plugin name",
            after: None,
            chars: name.chars().count(),
            reason: "give the plugin's file name without .wasm (no `/`, `\\`, `:`, `=`, white space, or leading `.`)",
        });
    }
    Ok(())
}

/// [`check_key`] for a key the operator gave: its error never shows the key.
fn check_given_key(plugin: &str, key: &str) -> Result<(), ConfigError> {
    check_key(key).map_err(|err| match err {
        ConfigError::BadName { what, reason, .. } => ConfigError::BadGivenName {
            what,
            after: Some(plugin.to_owned()),
            chars: key.chars().count(),
            reason,
        },
        other => other,
    })
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
        check_given_key(plugin, key)?;
        check_value(plugin, key, &value)?;
        self.values
            .entry(plugin.to_owned())
            .or_default()
            .insert(key.to_owned(), ConfigValue(value));
        Ok(())
    }

    /// Splits `NAME.KEY=REST` into `(NAME, KEY, REST)`. Errors show at most `NAME.KEY`,
    /// and only when it holds none of the characters a mistyped separator would leave in
    /// it (see [`ConfigError::BadGivenName`]).
    fn split(text: &str) -> Result<(&str, &str, &str), ConfigError> {
        let Some((target, rest)) = text.split_once('=') else {
            return Err(ConfigError::MissingEquals {
                chars: text.chars().count(),
            });
        };
        let Some((plugin, key)) = target.rsplit_once('.') else {
            if !target
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'))
            {
                return Err(ConfigError::BadGivenName {
                    what: "NAME.KEY before the `=`",
                    after: None,
                    chars: target.chars().count(),
                    reason: "give the plugin's name, a dot and the key, e.g. greet.API_TOKEN",
                });
            }
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
                // Not shown: a value given here by mistake would be printed.
                None => {
                    return Err(ConfigError::BadGivenName {
                        what: "NAME.KEY",
                        after: None,
                        chars: text.chars().count(),
                        reason: "give NAME.KEY or NAME.KEY=ENV_VAR, e.g. greet.API_TOKEN=MY_TOKEN",
                    })
                }
            },
        };
        check_plugin(plugin)?;
        check_given_key(plugin, key)?;
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
