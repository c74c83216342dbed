//! Tool namespaces: a prefix a plugin's tools (and prompts) are offered under, so two
//! plugins that export the same name can both load.
//!
//! A plugin gets one from its manifest (`namespace = "gh"`, at the top, before the
//! tables) or from the operator
//! ([`PluginHostConfigBuilder::tool_namespace`](crate::PluginHostConfigBuilder::tool_namespace),
//! the CLI's `--plugin-namespace NAME=PREFIX`); the operator's wins. Its tool `search` is
//! then offered as `gh_search`, and its prompt `summarize` as `gh_summarize`. Inside the
//! plugin nothing changes: a call of `gh_search` reaches the guest as `search`.
//!
//! # The separator is `_`
//! MCP (2025-11-25) allows `A-Z a-z 0-9 _ - .` in tool names, 1 to 128 characters, but
//! clients are stricter: the OpenAI API (Codex) refuses a name outside
//! `^[a-zA-Z0-9_-]+$`, Claude Desktop one outside `^[a-zA-Z0-9_-]{1,64}$`, so a dotted
//! `gh.search` would break those clients. This host's registry accepts only
//! `a-z A-Z 0-9 _ -` for the same reason ([`toolhost::registry::check_name`]). `_` is the
//! separator the model sees in every other tool name (`read_file`).
//!
//! # The rules a namespace meets
//! 1 to [`MAX_NAMESPACE_CHARS`] characters of `a-z` and `0-9`, starting with a letter:
//! no separator inside (so `gh` + `search` and `g` + `h_search` cannot both claim to be
//! the prefix), no `-` (tool names are compared ignoring case, `-` and `_`, so `g-h`
//! would only look like `gh`), no upper case for the same reason. The final name must
//! still be at most [`MAX_TOOL_NAME_LEN`] characters, and is checked by the registry as
//! any other: a namespace cannot make a built-in tool's name (`read` + `file` is
//! `read_file`, refused as reserved) or take another plugin's tool.
//!
//! ```
//! use toolhost_plugin::namespace::{check_namespace, namespaced};
//!
//! assert_eq!(namespaced("gh", "search"), "gh_search");
//! assert!(check_namespace("gh").is_ok());
//! assert!(check_namespace("g_h").is_err());
//! assert!(check_namespace("GH").is_err());
//! ```

use toolhost::registry::MAX_TOOL_NAME_LEN;

/// Between the namespace and the tool's own name: `gh` + `search` = `gh_search`.
pub const NAMESPACE_SEPARATOR: char = '_';

/// Longest namespace, in characters: short enough that the final name of a typical tool
/// stays under the 64 characters some clients allow (Claude Desktop).
pub const MAX_NAMESPACE_CHARS: usize = 32;

/// What is wrong with a namespace.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NamespaceError {
    /// Empty.
    #[error("the namespace is empty; give 1 to {MAX_NAMESPACE_CHARS} characters of a-z and 0-9, starting with a letter, e.g. \"gh\"")]
    Empty,
    /// Longer than [`MAX_NAMESPACE_CHARS`].
    #[error("the namespace is {chars} characters long; the most is {MAX_NAMESPACE_CHARS}: choose a shorter one, e.g. \"gh\"")]
    TooLong {
        /// Its length in characters.
        chars: usize,
    },
    /// A character other than `a-z` and `0-9`, or a first character that is not a letter.
    #[error("the namespace {shown} may hold only a-z and 0-9, starting with a letter (no \"_\": it separates the namespace from the tool's name; no \"-\", upper case, space, \"/\" or \".\"), e.g. \"gh\"")]
    Invalid {
        /// The namespace, quoted and shortened to 40 characters with control characters
        /// escaped, so an error never carries a whole hostile value.
        shown: String,
    },
}

/// Checks a namespace against the rules above.
///
/// # Errors
/// [`NamespaceError`] saying what is wrong.
pub fn check_namespace(namespace: &str) -> Result<(), NamespaceError> {
    if namespace.is_empty() {
        return Err(NamespaceError::Empty);
    }
    let chars = namespace.chars().count();
    if chars > MAX_NAMESPACE_CHARS {
        return Err(NamespaceError::TooLong { chars });
    }
    let mut bytes = namespace.bytes();
    let first_is_letter = bytes.next().is_some_and(|b| b.is_ascii_lowercase());
    if !first_is_letter
        || !namespace
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
    {
        let shortened: String = namespace.chars().take(40).collect();
        return Err(NamespaceError::Invalid {
            shown: format!("{shortened:?}"),
        });
    }
    Ok(())
}

/// The name `tool` is offered under in `namespace`: `namespace_tool`.
pub fn namespaced(namespace: &str, tool: &str) -> String {
    let mut name = String::with_capacity(namespace.len() + 1 + tool.len());
    name.push_str(namespace);
    name.push(NAMESPACE_SEPARATOR);
    name.push_str(tool);
    name
}

/// Checks that `namespace` keeps `tool`'s final name within [`MAX_TOOL_NAME_LEN`].
///
/// # Errors
/// A message naming the tool, the final length and the fix.
pub(crate) fn check_final_name(namespace: &str, tool: &str) -> Result<String, String> {
    let name = namespaced(namespace, tool);
    if name.len() > MAX_TOOL_NAME_LEN {
        return Err(format!(
            "the namespace \"{namespace}\" makes the name of its tool \"{tool}\" {} characters long; tool names are at most {MAX_TOOL_NAME_LEN}: choose a shorter namespace",
            name.len()
        ));
    }
    Ok(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_namespaces_are_refused_with_what_to_write() {
        for bad in [
            "g/h", "g h", "gé", "g_h", "g-h", "GH", "1gh", "g.h", "g\nh", "ĝh",
        ] {
            let err = check_namespace(bad).unwrap_err();
            assert!(
                matches!(err, NamespaceError::Invalid { .. }),
                "{bad:?}: {err:?}"
            );
            assert!(
                err.to_string().contains("may hold only a-z and 0-9"),
                "{err}"
            );
        }
        assert_eq!(check_namespace(""), Err(NamespaceError::Empty));
        let long = "a".repeat(10 * 1024);
        let err = check_namespace(&long).unwrap_err();
        assert_eq!(err, NamespaceError::TooLong { chars: 10 * 1024 });
        assert!(err.to_string().len() < 200, "{err}");
        // A long value with a bad character is quoted shortened, never whole.
        let err = check_namespace(&format!("a{}/", "b".repeat(20))).unwrap_err();
        assert!(err.to_string().len() < 300, "{err}");
        assert_eq!(
            check_namespace(&"a".repeat(MAX_NAMESPACE_CHARS + 1)),
            Err(NamespaceError::TooLong {
                chars: MAX_NAMESPACE_CHARS + 1
            })
        );
        assert_eq!(check_namespace(&"a".repeat(MAX_NAMESPACE_CHARS)), Ok(()));
        assert_eq!(check_namespace("gh2"), Ok(()));
    }

    #[test]
    fn the_final_name_stays_within_the_limit() {
        let tool = "t".repeat(MAX_TOOL_NAME_LEN - 3);
        assert_eq!(check_final_name("gh", &tool), Ok(format!("gh_{tool}")));
        let err = check_final_name("ghx", &tool).unwrap_err();
        assert!(err.contains("129 characters long"), "{err}");
        assert!(err.contains("choose a shorter namespace"), "{err}");
    }
}
