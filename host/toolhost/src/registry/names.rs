//! Which names a tool may take: the names reserved for the host's built-in tools, and the
//! look-alike rule.
//!
//! A model picks a tool by its name, so a plugin must not be able to pass for a built-in
//! tool or for another plugin's tool:
//!
//! - The built-in tools' names ([`RESERVED_TOOL_NAMES`]) are taken only through
//!   [`Registry::register_builtin`](super::Registry::register_builtin). Any other
//!   registration of one of them, or of a look-alike of one, is
//!   [`RegisterError::Reserved`](super::RegisterError::Reserved), even when the built-in
//!   itself is not registered (`write_file` under `--read-only`).
//! - Two tools whose names differ only in case, `-` or `_` cannot both be registered
//!   ([`RegisterError::LookAlike`](super::RegisterError::LookAlike)): `READ_FILE`,
//!   `read-file`, `ReadFile` and `readfile` all look like `read_file`. [`name_key`] is the
//!   form names are compared in.
//!
//! Separators are removed, not only unified: `readfile` and `read_file` read as the same
//! tool to a model as well as to a person, while two real tools that differ only by an
//! underscore are not worth the confusion. Look-alike characters (`l` and `1`, `O` and
//! `0`) are not folded: names are ASCII, and a model reads tokens, not glyphs.
//!
//! ```
//! use toolhost::registry::{name_key, Arguments, CallContext, Environment, RegisterError, Registry, ToolDefinition, ToolResult};
//!
//! let noop = |_c: CallContext, _a: Arguments, _e: Environment| async { Ok(ToolResult::default()) };
//! let registry = Registry::new();
//! assert_eq!(name_key("Read-File"), "readfile");
//! assert!(matches!(
//!     registry.register(ToolDefinition::new("write_file", "", serde_json::Value::Null), noop),
//!     Err(RegisterError::Reserved { .. })
//! ));
//! registry.register(ToolDefinition::new("my_tool", "", serde_json::Value::Null), noop)?;
//! assert_eq!(
//!     registry.register(ToolDefinition::new("My-Tool", "", serde_json::Value::Null), noop),
//!     Err(RegisterError::LookAlike { name: "My-Tool".into(), existing: "my_tool".into() })
//! );
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

/// The names of every tool the host itself provides: the file tools
/// (`tools::DEFAULT_TOOL_NAMES`, `search` among them) and the plan tool `todo_write`.
/// Only [`Registry::register_builtin`](super::Registry::register_builtin) may register
/// them or a look-alike of them; they stay reserved when the built-in is turned off, so a
/// plugin cannot stand in for a tool the operator disabled.
pub const RESERVED_TOOL_NAMES: [&str; 11] = [
    "read_file",
    "list_files",
    "write_file",
    "delete_file",
    "grep",
    "glob",
    "edit_file",
    "multi_edit",
    "move_file",
    "search",
    "todo_write",
];

/// The form tool names are compared in for look-alikes: ASCII lowercase, with every `-`
/// and `_` removed. Two names with the same key cannot both be registered.
pub fn name_key(name: &str) -> String {
    name.chars()
        .filter(|c| *c != '-' && *c != '_')
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

/// The reserved name whose key is `key`, if any.
pub(super) fn reserved_for(key: &str) -> Option<&'static str> {
    RESERVED_TOOL_NAMES
        .into_iter()
        .find(|reserved| name_key(reserved) == key)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::Value;

    use super::*;
    use crate::registry::{
        Arguments, CallContext, Environment, Handler, RegisterError, Registry, ToolDefinition,
        ToolResult,
    };

    fn handler() -> Arc<dyn Handler> {
        Arc::new(|_c: CallContext, _a: Arguments, _e: Environment| async {
            Ok(ToolResult::default())
        })
    }

    fn definition(name: &str) -> ToolDefinition {
        ToolDefinition::new(name, "", Value::Null)
    }

    fn register(registry: &Registry, name: &str) -> Result<(), RegisterError> {
        registry.register_shared(definition(name), Some(handler()))
    }

    fn builtin(registry: &Registry, name: &str) -> Result<(), RegisterError> {
        registry.register_builtin(
            definition(name),
            |_c: CallContext, _a: Arguments, _e: Environment| async { Ok(ToolResult::default()) },
        )
    }

    #[test]
    fn keys_fold_case_and_drop_separators() {
        for name in [
            "read_file",
            "READ_FILE",
            "read-file",
            "ReadFile",
            "readfile",
            "r_e-a_d-file",
        ] {
            assert_eq!(name_key(name), "readfile", "{name}");
        }
        assert_ne!(name_key("read_files"), "readfile");
    }

    #[test]
    fn reserved_names_are_refused_to_others_even_when_the_builtin_is_absent() {
        let registry = Registry::new();
        for name in RESERVED_TOOL_NAMES {
            assert_eq!(
                register(&registry, name),
                Err(RegisterError::Reserved {
                    name: name.into(),
                    builtin: name.into()
                }),
                "{name}"
            );
        }
        assert!(registry.is_empty());
    }

    #[test]
    fn look_alikes_of_reserved_names_are_refused() {
        let registry = Registry::new();
        builtin(&registry, "read_file").unwrap();
        for (name, reserved) in [
            ("READ_FILE", "read_file"),
            ("read-file", "read_file"),
            ("ReadFile", "read_file"),
            ("readfile", "read_file"),
            ("Write-File", "write_file"),
            ("TODO_WRITE", "todo_write"),
            ("Search", "search"),
        ] {
            let err = register(&registry, name).unwrap_err();
            assert_eq!(
                err,
                RegisterError::Reserved {
                    name: name.into(),
                    builtin: reserved.into()
                }
            );
            assert_eq!(
                err.to_string(),
                format!(
                    "tool name \"{name}\" is reserved for the host's built-in tool \"{reserved}\" \
                     (names are compared ignoring case, - and _; the name stays reserved when that \
                     tool is turned off); choose a clearly different name"
                )
            );
        }
        assert_eq!(registry.names(), ["read_file"]);
    }

    #[test]
    fn builtins_take_reserved_names_but_not_twice_or_as_look_alikes() {
        let registry = Registry::new();
        builtin(&registry, "read_file").unwrap();
        builtin(&registry, "todo_write").unwrap();
        assert_eq!(
            builtin(&registry, "read_file"),
            Err(RegisterError::DuplicateTool {
                name: "read_file".into()
            })
        );
        assert_eq!(
            builtin(&registry, "Read-File"),
            Err(RegisterError::LookAlike {
                name: "Read-File".into(),
                existing: "read_file".into()
            })
        );
        // A built-in of an unreserved name is an ordinary tool to the look-alike rule.
        builtin(&registry, "my_tool").unwrap();
        assert_eq!(
            register(&registry, "MY-TOOL"),
            Err(RegisterError::LookAlike {
                name: "MY-TOOL".into(),
                existing: "my_tool".into()
            })
        );
        assert_eq!(registry.names(), ["read_file", "todo_write", "my_tool"]);
    }

    #[test]
    fn look_alikes_of_registered_tools_are_refused_naming_the_first() {
        let registry = Registry::new();
        register(&registry, "my_tool").unwrap();
        for name in ["My-Tool", "MY_TOOL", "mytool", "my__tool", "my-tool"] {
            let err = register(&registry, name).unwrap_err();
            assert_eq!(
                err,
                RegisterError::LookAlike {
                    name: name.into(),
                    existing: "my_tool".into()
                }
            );
            assert_eq!(
                err.to_string(),
                format!(
                    "tool name \"{name}\" looks like the registered tool \"my_tool\" (names are \
                     compared ignoring case, - and _, so a model could take one for the other); \
                     choose a clearly different name"
                )
            );
        }
        assert_eq!(
            register(&registry, "my_tool"),
            Err(RegisterError::DuplicateTool {
                name: "my_tool".into()
            })
        );
        assert_eq!(registry.names(), ["my_tool"]);
    }

    #[test]
    fn look_alikes_within_one_batch_refuse_the_whole_batch() {
        let registry = Registry::new();
        let batch = ["alpha", "fetch_url", "Fetch-URL"]
            .into_iter()
            .map(|name| (definition(name), handler()))
            .collect();
        assert_eq!(
            registry.register_all(batch),
            Err(RegisterError::LookAlike {
                name: "Fetch-URL".into(),
                existing: "fetch_url".into()
            })
        );
        assert!(registry.is_empty());
    }

    #[test]
    fn the_name_of_a_refusal() {
        assert_eq!(RegisterError::EmptyName.name(), None);
        assert_eq!(
            RegisterError::LookAlike {
                name: "A".into(),
                existing: "a".into()
            }
            .name(),
            Some("A")
        );
    }
}
