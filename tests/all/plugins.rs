//! Well-behaved plugins next to the built-in tools: the spec's examples, file grants,
//! concurrency, and load failures that spare the other plugins.

use serde_json::{json, Value};
use toolhost::registry::ToolError;
use toolhost::tools::DEFAULT_TOOL_NAMES;
use toolhost_plugin::{FileAccess, PluginErrorKind};

use crate::common::{setup, setup_with, Options};

/// The built-in file tools over a directory, in order (no `search`: a directory is not
/// searchable).
fn builtins() -> Vec<&'static str> {
    DEFAULT_TOOL_NAMES
        .into_iter()
        .filter(|name| *name != "search")
        .collect()
}

#[tokio::test]
async fn plugin_tools_follow_builtins_in_file_name_order() {
    let setup = setup(&["wordcount", "greet", "multi", "divide"]);
    assert!(setup.report.failed.is_empty(), "{:?}", setup.report.failed);
    let mut expected: Vec<&str> = builtins();
    expected.extend(["divide", "greet", "upper", "lower", "wordcount"]);
    assert_eq!(setup.registry.names(), expected);
    let loaded: Vec<(&str, Vec<String>)> = setup
        .report
        .loaded
        .iter()
        .map(|plugin| (plugin.name.as_str(), plugin.tools.clone()))
        .collect();
    assert_eq!(
        loaded,
        [
            ("divide", vec!["divide".to_owned()]),
            ("greet", vec!["greet".to_owned()]),
            ("multi", vec!["upper".to_owned(), "lower".to_owned()]),
            ("wordcount", vec!["wordcount".to_owned()]),
        ]
    );
    let greet = setup
        .registry
        .definitions()
        .into_iter()
        .find(|definition| definition.name == "greet")
        .expect("greet registered");
    assert_eq!(greet.description, "Greet a person by name.");
    assert_eq!(greet.parameters["required"], json!(["name"]));
}

#[tokio::test]
async fn four_tools_of_one_component_each_answer_for_themselves() {
    // The bench lists 500 copies of this fixture; each of its tools must be its own.
    let setup = setup(&["texttools"]);
    assert!(setup.report.failed.is_empty(), "{:?}", setup.report.failed);
    assert_eq!(
        setup.report.loaded[0].tools,
        ["upper", "lower", "reverse", "length"]
    );
    let text = r#"{"text":"Ünïcode ok"}"#;
    for (tool, expected) in [
        ("upper", "ÜNÏCODE OK"),
        ("lower", "ünïcode ok"),
        ("reverse", "ko edocïnÜ"),
        ("length", "10"),
    ] {
        assert_eq!(
            setup.call(tool, text).await.expect(tool),
            json!(expected),
            "{tool}"
        );
    }
    // A model that leaves out the text gets the plugin's own argument error.
    match setup.call("reverse", "{}").await {
        Err(ToolError::InvalidArguments { tool, message }) => {
            assert_eq!(tool, "reverse");
            assert!(message.contains("text"), "{message}");
        }
        other => panic!("expected InvalidArguments, got {other:?}"),
    }
}

#[tokio::test]
async fn spec_examples_give_exact_results_and_error_kinds() {
    let setup = setup(&["greet", "divide"]);
    setup.assert_greet_works().await;
    assert_eq!(
        setup.call("divide", r#"{"by":4}"#).await.expect("divide"),
        json!(0.25)
    );
    assert_eq!(
        setup
            .call("divide", r#"{"by":4,"value":10}"#)
            .await
            .expect("divide"),
        json!(2.5)
    );

    // ExampleRegistry_Dispatch: {} is InvalidArguments, by=0 panics, multiply is unknown.
    match setup.call("divide", "{}").await {
        Err(ToolError::InvalidArguments { tool, message }) => {
            assert_eq!(tool, "divide");
            assert_eq!(message, r#"argument "by" is required"#);
        }
        other => panic!("expected InvalidArguments, got {other:?}"),
    }
    match setup.call("divide", r#"{"by":0}"#).await {
        Err(ToolError::ToolPanicked { tool, message }) => {
            assert_eq!(tool, "divide");
            assert!(message.contains("division by zero"), "{message}");
        }
        other => panic!("expected ToolPanicked, got {other:?}"),
    }
    assert_eq!(
        setup.call("multiply", "").await,
        Err(ToolError::UnknownTool {
            name: "multiply".into()
        })
    );
    // A wrong type is caught by the plugin's own argument parsing.
    assert!(matches!(
        setup.call("divide", r#"{"by":"four"}"#).await,
        Err(ToolError::InvalidArguments { .. })
    ));
    setup.assert_greet_works().await;
}

#[tokio::test]
async fn wordcount_reads_through_its_grant() {
    let setup = setup(&["greet", "wordcount"]);
    assert!(setup.report.failed.is_empty(), "{:?}", setup.report.failed);
    assert_eq!(setup.report.loaded[1].grants, FileAccess::Read);
    setup
        .storage
        .write("notes/a.md", b"one two\nthree\n", "text/markdown")
        .expect("seed");
    assert_eq!(
        setup
            .call("wordcount", r#"{"path":"notes/a.md"}"#)
            .await
            .expect("wordcount"),
        json!({"path": "notes/a.md", "lines": 2, "words": 3, "bytes": 14})
    );
    // The built-in tools see the same store.
    assert_eq!(
        setup
            .call("read_file", r#"{"path":"notes/a.md"}"#)
            .await
            .expect("read_file")["content"],
        json!("1\tone two\n2\tthree\n")
    );
    let missing = setup.call("wordcount", r#"{"path":"nope.md"}"#).await;
    assert!(
        matches!(missing, Err(ToolError::Failed { .. })),
        "{missing:?}"
    );
}

#[tokio::test]
async fn a_grant_the_host_does_not_allow_is_refused_and_the_rest_loads() {
    let setup = setup_with(
        &["greet", "wordcount"],
        Options {
            file_access: FileAccess::None,
            ..Options::default()
        },
    );
    assert_eq!(
        setup.registry.names().last().map(String::as_str),
        Some("greet")
    );
    assert_eq!(setup.report.failed.len(), 1);
    let failure = &setup.report.failed[0];
    assert!(
        matches!(failure.error.kind(), PluginErrorKind::GrantDenied { .. }),
        "{:?}",
        failure.error
    );
    assert!(
        failure.error.to_string().contains("wordcount"),
        "{}",
        failure.error
    );
    setup.assert_greet_works().await;
}

#[tokio::test]
async fn broken_plugins_are_reported_by_name_and_the_rest_load() {
    let setup = {
        // A non-component, the wrong world, a taken name, next to good plugins.
        let plugins = tempfile::tempdir().expect("dir");
        std::fs::write(plugins.path().join("broken.wasm"), b"\0asm garbage").expect("write");
        toolhost_tests::install(plugins.path(), &["greet", "wrong_world", "multi"])
            .expect("install");
        // Named to load after greet.wasm, whose tool name it also declares.
        std::fs::copy(
            toolhost_tests::DUPNAME,
            plugins.path().join("zz_dupname.wasm"),
        )
        .expect("copy dupname");
        let registry = toolhost::registry::Registry::new();
        let host = toolhost_plugin::PluginHost::new(
            toolhost_plugin::PluginHostConfig::builder()
                .cache_dir(Some(crate::common::cache_dir()))
                .build(),
        )
        .expect("host");
        let report = host.load_dir(plugins.path(), &registry);
        (registry, report, plugins)
    };
    let (registry, report, plugins) = setup;
    let failed: Vec<String> = report
        .failed
        .iter()
        .map(|failure| {
            failure
                .path
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    assert_eq!(
        failed,
        ["broken.wasm", "wrong_world.wasm", "zz_dupname.wasm"]
    );
    for failure in &report.failed {
        let name = failure
            .path
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        assert!(
            failure.error.to_string().contains(&name),
            "{}",
            failure.error
        );
    }
    assert!(
        matches!(
            report.failed[0].error.kind(),
            PluginErrorKind::NotAComponent { .. }
        ),
        "{:?}",
        report.failed[0].error
    );
    assert!(
        matches!(
            report.failed[1].error.kind(),
            PluginErrorKind::WrongWorld { .. }
        ),
        "{:?}",
        report.failed[1].error
    );
    assert!(
        matches!(
            report.failed[2].error.kind(),
            PluginErrorKind::DuplicateTool { .. }
        ),
        "{:?}",
        report.failed[2].error
    );
    // The message names both plugins' files, and the namespace that would let both load.
    assert_eq!(
        report.failed[2].error.to_string(),
        format!(
            "{}: declares tool \"greet\", but the plugin {} already declares it; none of its tools were registered. Give one of the two plugins a namespace (`namespace = \"PREFIX\"` at the top of its manifest, or the operator's --plugin-namespace NAME=PREFIX, which offers its tools as PREFIX_NAME), rename the tool, or remove the other one",
            plugins.path().join("zz_dupname.wasm").display(),
            plugins.path().join("greet.wasm").display()
        )
    );
    assert_eq!(registry.names(), ["greet", "upper", "lower"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_concurrent_calls_into_one_plugin_all_succeed() {
    let setup = setup(&["greet"]);
    let calls = (0..8).map(|i| {
        let registry = std::sync::Arc::clone(&setup.registry);
        tokio::spawn(async move {
            registry
                .dispatch(
                    &toolhost::registry::CallContext::new(),
                    &toolhost::registry::ToolCall::new(
                        "greet",
                        format!(r#"{{"name":"caller {i}"}}"#),
                    ),
                    &toolhost::registry::Environment::generate(),
                )
                .await
        })
    });
    let results = futures_util::future::join_all(calls).await;
    for (i, result) in results.into_iter().enumerate() {
        let content = result.expect("task").expect("call").content;
        assert_eq!(content, Value::from(format!("Hello, caller {i}!")));
    }
}

#[tokio::test]
async fn a_second_host_loads_from_the_compile_cache() {
    use toolhost_plugin::cache::CompileSource;
    let cache = tempfile::tempdir().expect("cache");
    let plugins = tempfile::tempdir().expect("plugins");
    toolhost_tests::install(plugins.path(), &["greet"]).expect("install");
    let load = || {
        let host = toolhost_plugin::PluginHost::new(
            toolhost_plugin::PluginHostConfig::builder()
                .cache_dir(Some(cache.path().to_owned()))
                .build(),
        )
        .expect("host");
        let registry = toolhost::registry::Registry::new();
        host.load_dir(plugins.path(), &registry)
            .loaded
            .remove(0)
            .compile
    };
    assert!(matches!(load(), CompileSource::Compiled(_)));
    assert!(matches!(load(), CompileSource::CacheHit(_)));
}

/// The `progress` import: a plugin's reports reach the caller's progress hook in order,
/// with their messages; a call made without a hook costs the plugin nothing and fails
/// nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugins_progress_reports_reach_the_caller_that_asked() {
    use std::sync::{Arc, Mutex};
    use toolhost::registry::{CallContext, Environment, ProgressHook, ToolCall};

    let setup = setup(&["conformance"]);
    assert!(setup.report.failed.is_empty(), "{:?}", setup.report.failed);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&seen);
    let ctx = CallContext::new().with_progress(ProgressHook::new(move |p| {
        sink.lock().unwrap().push((p.progress, p.total, p.message));
    }));
    let result = setup
        .registry
        .dispatch(
            &ctx,
            &ToolCall::new("test_tool_with_progress", "{}"),
            &Environment::generate(),
        )
        .await
        .expect("test_tool_with_progress");
    assert_eq!(
        result.content,
        json!("Reported progress 0, 50 and 100 of 100.")
    );
    let reports = seen.lock().unwrap().clone();
    assert_eq!(
        reports,
        [0.0, 50.0, 100.0]
            .map(|done| (done, Some(100.0), Some(format!("{done} of 100"))))
            .to_vec()
    );
    // Without a hook, the same call just runs.
    assert_eq!(
        setup
            .call("test_tool_with_progress", "{}")
            .await
            .expect("no hook"),
        json!("Reported progress 0, 50 and 100 of 100.")
    );
}

#[tokio::test]
async fn a_composing_plugin_that_greps_and_reads_answers_as_the_direct_calls_do() {
    use toolhost_plugin::manifest::ToolNames;
    let setup = setup_with(
        &["greet", "hostile_compose"],
        Options {
            plugin_tools: Some(ToolNames::only(["grep", "read_file"])),
            ..Options::default()
        },
    );
    assert!(setup.report.failed.is_empty(), "{:?}", setup.report.failed);
    for (path, text) in [
        ("notes/a.md", "alpha\nneedle one\n"),
        ("notes/b.md", "nothing here\n"),
        ("c.txt", "a needle\nand more\n"),
    ] {
        setup
            .storage
            .write(path, text.as_bytes(), "text/plain")
            .expect("seed");
    }
    let composed = setup
        .call("find_and_read", r#"{"pattern":"needle"}"#)
        .await
        .expect("find_and_read");
    let found = setup
        .call(
            "grep",
            r#"{"pattern":"needle","output_mode":"files_with_matches"}"#,
        )
        .await
        .expect("grep");
    let mut read = Vec::new();
    for path in found["files"].as_array().expect("files") {
        read.push(
            setup
                .call("read_file", &json!({"path": path}).to_string())
                .await
                .expect("read_file"),
        );
    }
    assert_eq!(read.len(), 2);
    assert_eq!(composed, json!({"files": found["files"], "read": read}));
    // greet is on the host but not granted by the operator: refused, not run.
    let refused = setup
        .call(
            "call_once",
            &json!({"tool": "greet", "arguments": r#"{"name":"Ada"}"#}).to_string(),
        )
        .await
        .expect("call_once");
    assert_eq!(refused["error"], "failed");
}
