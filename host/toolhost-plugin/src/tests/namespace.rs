//! Tool namespaces: two plugins exporting the same name load under different prefixes,
//! a collision without one is refused naming the fix, and a namespace can neither be
//! hostile text nor make a built-in's name or an over-long one.

use std::path::Path;

use super::fixture::{self, EMPTY_SCHEMA};
use super::*;
use crate::lock::PluginLock;

/// Writes `files` ((name, bytes)) into a fresh directory.
fn dir_with(files: &[(&str, &[u8])]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (name, bytes) in files {
        std::fs::write(dir.path().join(name), bytes).unwrap();
    }
    dir
}

fn load_with(config: PluginHostConfig, dir: &Path) -> (Registry, LoadReport) {
    let registry = Registry::new();
    let report = PluginHost::new(config).unwrap().load_dir(dir, &registry);
    (registry, report)
}

/// The fixture with `echo` and `fail` (the guest dispatches on the first letter of the
/// name it receives: `echo` echoes, a `z...` or `y...` name is "no such tool").
fn echo_fail() -> Vec<u8> {
    fixture::component(&[("echo", EMPTY_SCHEMA), ("fail", EMPTY_SCHEMA)])
}

#[tokio::test]
async fn the_same_tool_in_two_plugins_loads_under_two_namespaces_and_the_guest_gets_its_own_name() {
    let bytes = echo_fail();
    let dir = dir_with(&[
        ("a.wasm", &bytes),
        (
            "a.toml",
            b"namespace = \"zz\"\n[limits]\ntimeout_ms = 5000\n",
        ),
        ("b.wasm", &bytes),
        ("b.toml", b"namespace = \"yy\"\n"),
    ]);
    let (registry, report) = load_with(config(), dir.path());
    assert!(report.failed.is_empty(), "{:?}", report.failed);
    assert_eq!(
        registry.names(),
        ["zz_echo", "zz_fail", "yy_echo", "yy_fail"]
    );
    assert_eq!(report.loaded[0].namespace.as_deref(), Some("zz"));
    assert_eq!(report.loaded[0].tools, ["zz_echo", "zz_fail"]);
    // The guest is called as `echo`: were it given `zz_echo`, it would answer "no such tool".
    let result = call(&registry, "zz_echo", r#"{"a":1}"#).await.unwrap();
    assert_eq!(result.content, serde_json::json!({"a": 1}));
    let result = call(&registry, "yy_echo", r#"{"b":2}"#).await.unwrap();
    assert_eq!(result.content, serde_json::json!({"b": 2}));
    // The unprefixed names are not offered.
    assert!(matches!(
        call(&registry, "echo", "{}").await,
        Err(ToolError::UnknownTool { .. })
    ));
}

#[test]
fn a_collision_without_a_namespace_is_refused_naming_the_fix() {
    let bytes = echo_fail();
    let dir = dir_with(&[("a.wasm", &bytes), ("b.wasm", &bytes)]);
    let (registry, report) = load_with(config(), dir.path());
    let err = failure(&report, "b.wasm");
    assert!(
        matches!(err.kind(), PluginErrorKind::DuplicateTool { name, .. } if name == "echo"),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(text.contains("a.wasm already declares it"), "{text}");
    assert!(
        text.contains("Give one of the two plugins a namespace (`namespace = \"PREFIX\"` at the top of its manifest, or the operator's --plugin-namespace NAME=PREFIX"),
        "{text}"
    );
    assert_eq!(registry.names(), ["echo", "fail"]);
}

#[test]
fn the_operators_namespace_replaces_the_manifests() {
    let bytes = echo_fail();
    let dir = dir_with(&[
        ("a.wasm", &bytes),
        ("b.wasm", &bytes),
        ("b.toml", b"namespace = \"yy\"\n"),
    ]);
    let mut builder = config().to_builder();
    builder.tool_namespace("b", "xx").unwrap();
    let (registry, report) = load_with(builder.build(), dir.path());
    assert!(report.failed.is_empty(), "{:?}", report.failed);
    assert_eq!(registry.names(), ["echo", "fail", "xx_echo", "xx_fail"]);
    assert_eq!(report.loaded[1].namespace.as_deref(), Some("xx"));
}

#[test]
fn hostile_manifest_namespaces_are_refused_before_anything_loads() {
    let bytes = echo_fail();
    let long = "a".repeat(10 * 1024);
    for (namespace, expected) in [
        ("g/h", "may hold only a-z and 0-9"),
        ("g h", "may hold only a-z and 0-9"),
        ("gé", "may hold only a-z and 0-9"),
        ("g_h", "no \\\"_\\\": it separates"),
        ("GH", "may hold only a-z and 0-9"),
        ("", "the namespace is empty"),
        (
            long.as_str(),
            "the namespace is 10240 characters long; the most is 32",
        ),
    ] {
        let manifest = format!("namespace = {namespace:?}\n");
        let dir = dir_with(&[("a.wasm", &bytes), ("a.toml", manifest.as_bytes())]);
        let (registry, report) = load_with(config(), dir.path());
        let err = failure(&report, "a.wasm");
        let text = err.to_string();
        assert!(
            matches!(err.kind(), PluginErrorKind::Manifest { .. }),
            "{namespace:?}: {err:?}"
        );
        let expected = expected.replace("\\\"", "\"");
        assert!(text.contains("namespace: "), "{namespace:?}: {text}");
        assert!(text.contains(&expected), "{namespace:?}: {text}");
        assert!(
            text.len() < 2000,
            "the error does not carry the whole value: {}",
            text.len()
        );
        assert!(registry.is_empty(), "{namespace:?}");
    }
}

#[test]
fn a_namespace_that_makes_a_name_too_long_is_refused() {
    let tool = "t".repeat(100);
    let bytes = fixture::component(&[(tool.as_str(), EMPTY_SCHEMA)]);
    let namespace = "n".repeat(30);
    let manifest = format!("namespace = \"{namespace}\"\n");
    let dir = dir_with(&[("a.wasm", &bytes), ("a.toml", manifest.as_bytes())]);
    let (registry, report) = load_with(config(), dir.path());
    let err = failure(&report, "a.wasm");
    assert_eq!(err.kind().name(), "namespace");
    let text = err.to_string();
    assert!(
        text.contains(&format!(
            "its tool namespace \"{namespace}\" cannot be used: the namespace \"{namespace}\" makes the name of its tool \"{tool}\" 131 characters long; tool names are at most 128: choose a shorter namespace"
        )),
        "{text}"
    );
    assert!(registry.is_empty());
}

#[test]
fn a_namespace_cannot_make_a_builtin_name() {
    // `read` + `_` + `file` = `read_file`: refused as reserved, never shadowing the built-in.
    let bytes = fixture::component(&[("file", EMPTY_SCHEMA)]);
    let dir = dir_with(&[("a.wasm", &bytes), ("a.toml", b"namespace = \"read\"\n")]);
    let (registry, report) = load_with(config(), dir.path());
    let err = failure(&report, "a.wasm");
    match err.kind() {
        PluginErrorKind::BadDefinition { tool, reason } => {
            assert_eq!(tool, "read_file");
            assert!(
                reason.starts_with("tool name \"read_file\" is reserved for the host's built-in tool \"read_file\""),
                "{reason}"
            );
            assert!(
                reason
                    .ends_with("(the namespace \"read\" made this name: choose another namespace)"),
                "{reason}"
            );
        }
        other => panic!("expected BadDefinition, got {other:?}"),
    }
    assert!(registry.is_empty());
    // Without a namespace, a built-in's name is refused naming the namespace as a fix.
    let bytes = fixture::component(&[("grep", EMPTY_SCHEMA)]);
    let dir = dir_with(&[("a.wasm", &bytes)]);
    let (_, report) = load_with(config(), dir.path());
    let text = failure(&report, "a.wasm").to_string();
    assert!(
        text.contains("or give the plugin a namespace (`namespace = \"PREFIX\"` at the top of its manifest, or --plugin-namespace NAME=PREFIX)"),
        "{text}"
    );
}

#[test]
fn two_plugins_with_the_same_namespace_and_tool_refuse_the_second() {
    let bytes = echo_fail();
    let dir = dir_with(&[
        ("a.wasm", &bytes),
        ("a.toml", b"namespace = \"zz\"\n"),
        ("b.wasm", &bytes),
        ("b.toml", b"namespace = \"zz\"\n"),
    ]);
    let (registry, report) = load_with(config(), dir.path());
    let err = failure(&report, "b.wasm");
    assert!(
        matches!(err.kind(), PluginErrorKind::DuplicateTool { name, .. } if name == "zz_echo"),
        "{err:?}"
    );
    assert!(
        err.to_string().contains("a.wasm already declares it"),
        "{err}"
    );
    assert_eq!(registry.names(), ["zz_echo", "zz_fail"]);
}

#[test]
fn a_namespace_cannot_take_another_plugins_unprefixed_name() {
    // `gh` + `echo` would be `gh_echo`, which a plugin without namespace already offers.
    let plain = fixture::component(&[("gh_echo", EMPTY_SCHEMA)]);
    let dir = dir_with(&[
        ("a.wasm", &plain),
        ("b.wasm", &echo_fail()),
        ("b.toml", b"namespace = \"gh\"\n"),
    ]);
    let (registry, report) = load_with(config(), dir.path());
    let err = failure(&report, "b.wasm");
    assert!(
        matches!(err.kind(), PluginErrorKind::DuplicateTool { name, .. } if name == "gh_echo"),
        "{err:?}"
    );
    assert_eq!(registry.names(), ["gh_echo"]);
}

#[test]
fn inspect_shows_the_final_names() {
    let dir = dir_with(&[
        ("a.wasm", &echo_fail()),
        ("a.toml", b"namespace = \"zz\"\n"),
    ]);
    let host = PluginHost::new(config()).unwrap();
    let info = host.inspect(&dir.path().join("a.wasm")).unwrap();
    assert_eq!(info.namespace.as_deref(), Some("zz"));
    let names: Vec<&str> = info.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["zz_echo", "zz_fail"]);
}

#[tokio::test]
async fn a_reload_with_a_new_namespace_replaces_the_names() {
    let dir = dir_with(&[
        ("a.wasm", &echo_fail()),
        ("a.toml", b"namespace = \"zz\"\n"),
    ]);
    let host = PluginHost::new(config()).unwrap();
    let registry = Registry::new();
    let wasm = dir.path().join("a.wasm");
    let first = host.load_file(&wasm, &registry).unwrap();
    assert_eq!(first.tools, ["zz_echo", "zz_fail"]);
    std::fs::write(dir.path().join("a.toml"), "namespace = \"yy\"\n").unwrap();
    let second = host
        .reload_file(&wasm, &first.tools, &registry, None)
        .unwrap();
    assert_eq!(second.tools, ["yy_echo", "yy_fail"]);
    assert_eq!(registry.names(), ["yy_echo", "yy_fail"]);
    assert_eq!(
        call(&registry, "yy_echo", "{}").await.unwrap().content,
        serde_json::json!({})
    );
}

#[test]
fn a_locked_directory_pins_the_namespace_with_the_manifest() {
    let dir = dir_with(&[
        ("a.wasm", &echo_fail()),
        ("a.toml", b"namespace = \"zz\"\n"),
    ]);
    let (lock, _) = PluginLock::scan(dir.path(), None).unwrap();
    lock.write(dir.path()).unwrap();
    let (registry, report) = load_with(config(), dir.path());
    assert!(report.failed.is_empty(), "{:?}", report.failed);
    assert_eq!(registry.names(), ["zz_echo", "zz_fail"]);
    // A namespace changed without locking again is a changed manifest: refused.
    std::fs::write(dir.path().join("a.toml"), "namespace = \"yy\"\n").unwrap();
    let (registry, report) = load_with(config(), dir.path());
    assert_eq!(failure(&report, "a.wasm").kind().name(), "unpinned");
    assert!(registry.is_empty());
}

#[tokio::test]
async fn a_namespace_names_the_prompts_too_and_the_guest_gets_its_own_prompt_name() {
    use std::collections::BTreeMap;
    use toolhost::registry::ContentBlock;

    let mut builder = config().to_builder();
    builder.tool_namespace("rich", "rr").unwrap();
    let (_dir, registry) = super::rich::rich_registry(builder.build());
    let catalog = registry.catalog();
    let prompts: Vec<String> = catalog.prompts().into_iter().map(|p| p.name).collect();
    assert_eq!(prompts, ["rr_rich_summary"]);
    assert!(catalog.prompt("rich_summary").is_none());
    // Resources keep their URI namespace, the plugin's file name.
    assert_eq!(catalog.resource_sources()[0].0, "plugin://rich/");
    let (_, prompt) = catalog.prompt("rr_rich_summary").unwrap();
    let filled = prompt
        .get(
            CallContext::new(),
            "rr_rich_summary".into(),
            BTreeMap::from([("topic".to_owned(), "tides".to_owned())]),
            Environment::default(),
        )
        .await
        .unwrap();
    // The guest answered for `rich_summary`: were it asked for `rr_rich_summary`, it
    // would refuse the unknown prompt.
    assert_eq!(
        filled.messages[0].content,
        ContentBlock::text("Summarize tides.")
    );
    assert!(registry.names().iter().all(|name| name.starts_with("rr_")));
}

#[tokio::test]
async fn one_component_under_two_names_is_compiled_once_per_load() {
    let bytes = echo_fail();
    let other = fixture::component(&[("other", EMPTY_SCHEMA)]);
    let dir = dir_with(&[
        ("a.wasm", &bytes),
        ("a.toml", b"namespace = \"zz\"\n"),
        ("b.wasm", &bytes),
        ("b.toml", b"namespace = \"yy\"\n"),
        ("c.wasm", &other),
    ]);
    // No compile cache: without sharing, every file would be compiled.
    let (registry, report) = load_with(config(), dir.path());
    assert!(report.failed.is_empty(), "{:?}", report.failed);
    let sources: Vec<&str> = report
        .loaded
        .iter()
        .map(|p| match p.compile {
            crate::cache::CompileSource::Compiled(_) => "compiled",
            crate::cache::CompileSource::CacheHit(_) => "shared",
            crate::cache::CompileSource::Quick(_) => "quick",
        })
        .collect();
    // One thread per core (at most one per file) compiles a run of the files in order:
    // on up to two cores a and b fall to one thread, which compiles a and shares it with
    // b; on more, each may fall to its own thread and both compile.
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    if cores <= 2 {
        assert_eq!(sources, ["compiled", "shared", "compiled"]);
    } else {
        assert_eq!(sources[2], "compiled");
    }
    // Each plugin still calls as itself.
    assert_eq!(
        call(&registry, "zz_echo", r#"{"a":1}"#)
            .await
            .unwrap()
            .content,
        serde_json::json!({"a": 1})
    );
    assert_eq!(
        call(&registry, "yy_echo", r#"{"b":2}"#)
            .await
            .unwrap()
            .content,
        serde_json::json!({"b": 2})
    );
}
