//! What one plugin gets: the keys its manifest declares ([`ConfigKey`]) matched with the
//! operator's values into a [`PluginConfig`] (exactly its declared keys, for the `config`
//! import and its environment), and the [`Redactor`] of its secrets.

use super::{ConfigValue, ConfigValues, Redactor};
use std::fmt;

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
