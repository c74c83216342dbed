//! Plugin tool names against the built-ins' reserved names and the look-alike rule of
//! [`Registry`](toolhost::registry::Registry).

use std::sync::Arc;

use super::{failure, fixture, load_dir_of};
use crate::PluginErrorKind;
use toolhost::registry::Registry;
use toolhost::tools::{register_vfs_tools, VfsToolOptions};
use toolhost::vfs::MemoryStorage;

/// A registry with the file tools under `--read-only`: no write_file.
fn read_only_builtins() -> Registry {
    let registry = Registry::new();
    let options = VfsToolOptions::builder(Arc::new(MemoryStorage::new()))
        .read_only(true)
        .build();
    register_vfs_tools(&registry, options).unwrap();
    registry
}

#[test]
fn a_plugin_cannot_take_a_builtin_name_or_a_look_alike_of_one() {
    let registry = read_only_builtins();
    let builtins = registry.names();
    assert!(!registry.has("write_file"));
    for (name, builtin) in [
        ("write_file", "write_file"),
        ("READ_FILE", "read_file"),
        ("read-file", "read_file"),
        ("Todo-Write", "todo_write"),
    ] {
        let plugin = fixture::component(&[
            ("zeta", fixture::EMPTY_SCHEMA),
            (name, fixture::EMPTY_SCHEMA),
        ]);
        let (_dir, report) = load_dir_of(&[("p.wasm", &plugin)], &registry);
        let err = failure(&report, "p.wasm");
        match err.kind() {
            PluginErrorKind::BadDefinition { tool, reason } => {
                assert_eq!(tool, name);
                assert!(
                    reason.starts_with(&format!(
                        "tool name \"{name}\" is reserved for the host's built-in tool \"{builtin}\""
                    )),
                    "{reason}"
                );
            }
            other => panic!("{name}: expected BadDefinition, got {other:?}"),
        }
        assert_eq!(
            registry.names(),
            builtins,
            "{name}: nothing of the plugin registered"
        );
    }
}

#[test]
fn a_second_plugin_with_a_look_alike_name_is_refused_naming_the_first() {
    let registry = Registry::new();
    let first = fixture::component(&[("my_tool", fixture::EMPTY_SCHEMA)]);
    let second = fixture::component(&[
        ("other", fixture::EMPTY_SCHEMA),
        ("My-Tool", fixture::EMPTY_SCHEMA),
    ]);
    let (_dir, report) = load_dir_of(&[("a.wasm", &first), ("b.wasm", &second)], &registry);
    let err = failure(&report, "b.wasm");
    assert!(
        matches!(err.kind(), PluginErrorKind::DuplicateTool { name, .. } if name == "My-Tool"),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(
        text.contains(
            "declares tool \"My-Tool\", but it looks like the registered tool \"my_tool\" (tool names are compared ignoring case, - and _); none of its tools were registered"
        ),
        "{text}"
    );
    assert_eq!(registry.names(), ["my_tool"]);
}
