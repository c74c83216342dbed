//! The plugin's configuration: the values the operator set for the keys the plugin's
//! manifest declares (`[config]` in `NAME.toml`), and nothing else.
//!
//! ```toml
//! # weather.toml, next to weather.wasm
//! [config.API_TOKEN]
//! description = "Token for api.weather.example"
//! secret = true
//! ```
//!
//! The operator gives the value (`host run --plugin-config weather.API_TOKEN=...`, or
//! `--plugin-config-env weather.API_TOKEN=MY_ENV_VAR`, or `--plugin-config-file`); a
//! required key without a value keeps the plugin from loading, so [`require`] only fails
//! for a key declared `required = false`.
//!
//! ```no_run
//! use toolhost_sdk::{config, ToolError};
//!
//! fn token() -> Result<String, ToolError> {
//!     config::require("API_TOKEN")
//! }
//! ```
//!
//! A secret is returned like any other value. The host replaces secret values by
//! `[REDACTED]` in the plugin's log lines, stdout, stderr and error messages, but not in
//! results: never put a secret in a tool's result. The same values are the plugin's
//! environment variables (`std::env::var("API_TOKEN")` works too).

use crate::bindings::toolhost::plugin::config as wit;
use crate::ToolError;

/// The value of `key`; `None` when the manifest does not declare it, or declares it
/// optional and the operator set none.
pub fn get(key: &str) -> Option<String> {
    wit::get(key)
}

/// The value of `key`, or a [`ToolError::Failed`] for the model saying the tool is not
/// configured.
///
/// # Errors
/// [`ToolError::Failed`] when there is no value.
pub fn require(key: &str) -> Result<String, ToolError> {
    get(key).ok_or_else(|| not_configured(key))
}

/// Every key that has a value, sorted.
pub fn keys() -> Vec<String> {
    wit::keys()
}

/// The error [`require`] returns for `key`.
fn not_configured(key: &str) -> ToolError {
    ToolError::failed(format!(
        "this tool is not configured: it needs the setting {key}, which the host's operator has not given; do not retry, tell the user the tool needs {key}"
    ))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_missing_key_error_names_the_key_and_says_not_to_retry() {
        assert_eq!(
            super::not_configured("API_TOKEN").to_string(),
            "this tool is not configured: it needs the setting API_TOKEN, which the host's operator has not given; do not retry, tell the user the tool needs API_TOKEN"
        );
    }
}
