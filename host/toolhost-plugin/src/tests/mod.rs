//! The plugin host against real components: the fixture of [`fixture`], loaded from a
//! temporary directory, called through a [`Registry`].

mod ask;
mod cache;
mod capture;
mod catalog;
mod compose;
mod engines;
mod fixture;
mod http;
mod imports;
mod load;
mod load_fixture;
mod lock;
mod names;
mod namespace;
mod rich;
mod sampling;
mod tiers;
mod versions;

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use toolhost::registry::{
    CallContext, Environment, Limit, Registry, ToolCall, ToolError, ToolResult,
};

use super::*;

/// The standard fixture's bytes, built once.
fn standard() -> &'static [u8] {
    static BYTES: OnceLock<Vec<u8>> = OnceLock::new();
    BYTES.get_or_init(fixture::standard)
}

fn config() -> PluginHostConfig {
    PluginHostConfig {
        cache_dir: None,
        max_concurrent_calls: 8,
        ..PluginHostConfig::default()
    }
}

/// A directory holding `fx.wasm` (the standard fixture) and, if given, `fx.toml`.
fn plugin_dir(manifest: Option<&str>) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let wasm = dir.path().join("fx.wasm");
    std::fs::write(&wasm, standard()).unwrap();
    if let Some(text) = manifest {
        std::fs::write(dir.path().join("fx.toml"), text).unwrap();
    }
    (dir, wasm)
}

/// A registry with the standard fixture loaded under `config` and `manifest`.
fn loaded(config: PluginHostConfig, manifest: Option<&str>) -> (tempfile::TempDir, Registry) {
    let (dir, wasm) = plugin_dir(manifest);
    let host = PluginHost::new(config).unwrap();
    let registry = Registry::new();
    host.load_file(&wasm, &registry).unwrap();
    (dir, registry)
}

/// A registry with the plugin `name` (`name.wasm` in `dir`) loaded by a host of `config`.
fn load_one(dir: &Path, name: &str, config: PluginHostConfig) -> Registry {
    let host = PluginHost::new(config).unwrap();
    let registry = Registry::new();
    host.load_file(&dir.join(format!("{name}.wasm")), &registry)
        .unwrap();
    registry
}

/// What `tool` answers to `arguments` (its content), with `interaction` (or nobody) to
/// ask the client.
async fn answer_with<I: toolhost::registry::Interaction + 'static>(
    registry: &Registry,
    interaction: Option<Arc<I>>,
    tool: &str,
    arguments: serde_json::Value,
) -> serde_json::Value {
    let mut ctx = CallContext::new();
    if let Some(interaction) = interaction {
        ctx = ctx.with_interaction(interaction);
    }
    let call = ToolCall::new(tool, arguments.to_string());
    registry
        .dispatch(&ctx, &call, &Environment::generate())
        .await
        .unwrap()
        .content
}

async fn call(registry: &Registry, tool: &str, arguments: &str) -> Result<ToolResult, ToolError> {
    registry
        .dispatch(
            &CallContext::new(),
            &ToolCall::new(tool, arguments),
            &Environment::generate(),
        )
        .await
}

#[test]
fn the_host_and_its_handlers_can_be_shared_between_threads() {
    fn shared<T: Send + Sync + 'static>() {}
    shared::<PluginHost>();
    shared::<super::runtime::PluginTool>();
}

#[test]
fn loads_every_declared_tool() {
    let (_dir, wasm) = plugin_dir(None);
    let host = PluginHost::new(config()).unwrap();
    let registry = Registry::new();
    let plugin = host.load_file(&wasm, &registry).unwrap();
    assert_eq!(plugin.name, "fx");
    assert_eq!(plugin.tools, fixture::TOOLS);
    assert_eq!(registry.names(), fixture::TOOLS);
    assert_eq!(plugin.grants, FileAccess::None);
    assert_eq!(plugin.limits, PluginLimits::default());
    assert!(matches!(plugin.compile, CompileSource::Compiled(_)));
    assert_eq!(registry.definitions()[0].description, "t");
}

#[tokio::test]
async fn results_and_guest_errors_map_to_their_kinds() {
    let (_dir, registry) = loaded(config(), None);
    let result = call(&registry, "echo", r#"{"a": [1, 2]}"#).await.unwrap();
    assert_eq!(result.content, serde_json::json!({"a": [1, 2]}));
    assert_eq!(
        call(&registry, "fail", "{}").await,
        Err(ToolError::Failed {
            tool: "fail".into(),
            message: "nope".into()
        })
    );
    assert_eq!(
        call(&registry, "invalid", "{}").await,
        Err(ToolError::InvalidArguments {
            tool: "invalid".into(),
            message: "bad args".into()
        })
    );
    let err = call(&registry, "bad", "{}").await.unwrap_err();
    let ToolError::Failed { message, .. } = &err else {
        panic!("{err:?}")
    };
    assert!(
        message.starts_with("the plugin returned invalid JSON: key must be a string"),
        "{message}"
    );
}

/// A tool the plugin lists but then refuses (the SDK answers `failed` for a name it does
/// not know): the plugin's own message reaches the caller.
#[tokio::test]
async fn a_listed_tool_the_plugin_rejects_gives_its_own_error() {
    let (dir, wasm) = plugin_dir(None);
    std::fs::write(&wasm, fixture::component(&[("zzz", fixture::EMPTY_SCHEMA)])).unwrap();
    let registry = Registry::new();
    PluginHost::new(config())
        .unwrap()
        .load_file(&wasm, &registry)
        .unwrap();
    assert_eq!(
        call(&registry, "zzz", "{}").await,
        Err(ToolError::Failed {
            tool: "zzz".into(),
            message: "no such tool".into()
        })
    );
    drop(dir);
}

#[tokio::test]
async fn traps_are_crashes_and_the_next_call_works() {
    let (_dir, registry) = loaded(config(), None);
    assert_eq!(
        call(&registry, "crash", "{}").await,
        Err(ToolError::ToolPanicked {
            tool: "crash".into(),
            message: "wasm trap: wasm `unreachable` instruction executed".into()
        })
    );
    assert_eq!(
        call(&registry, "deep", "{}").await,
        Err(ToolError::ToolPanicked {
            tool: "deep".into(),
            message: "wasm trap: call stack exhausted".into()
        })
    );
    assert!(call(&registry, "echo", "{}").await.is_ok());
}

/// A CPU-bound guest on a single-threaded runtime: the epoch callback stops it at the
/// plugin's timeout even though no timer of the runtime can fire while it runs.
#[tokio::test(flavor = "current_thread")]
async fn a_spinning_guest_is_stopped_at_its_timeout() {
    let (_dir, registry) = loaded(config(), Some("[limits]\ntimeout_ms = 200\n"));
    let started = Instant::now();
    let err = call(&registry, "spin", "{}").await.unwrap_err();
    let elapsed = started.elapsed();
    assert_eq!(
        err,
        ToolError::TimedOut {
            tool: "spin".into(),
            limit: Duration::from_millis(200)
        }
    );
    assert!(elapsed >= Duration::from_millis(200), "{elapsed:?}");
    assert!(
        elapsed < Duration::from_millis(400),
        "stopped late: {elapsed:?}"
    );
    assert!(call(&registry, "echo", "{}").await.is_ok());
}

/// The caller's deadline, when sooner, is the one that applies; a cancellation stops the
/// guest too (it yields at every epoch tick).
#[tokio::test(flavor = "current_thread")]
async fn the_callers_deadline_and_cancellation_stop_a_spinning_guest() {
    let (_dir, registry) = loaded(config(), None);
    let started = Instant::now();
    let ctx = CallContext::with_timeout(Duration::from_millis(100));
    let err = registry
        .dispatch(&ctx, &ToolCall::new("spin", "{}"), &Environment::default())
        .await
        .unwrap_err();
    assert!(matches!(err, ToolError::TimedOut { .. }), "{err:?}");
    assert!(started.elapsed() < Duration::from_millis(300));

    let token = tokio_util::sync::CancellationToken::new();
    let ctx = CallContext::new().with_cancellation(token.clone());
    let cancel = async {
        tokio::time::sleep(Duration::from_millis(50)).await;
        token.cancel();
    };
    let (spin, env) = (ToolCall::new("spin", "{}"), Environment::default());
    let started = Instant::now();
    let (result, ()) = tokio::join!(registry.dispatch(&ctx, &spin, &env), cancel);
    assert_eq!(
        result,
        Err(ToolError::Cancelled {
            tool: "spin".into()
        })
    );
    assert!(started.elapsed() < Duration::from_millis(200));
}

#[tokio::test]
async fn memory_fuel_and_output_limits_are_limit_errors() {
    let manifest = "[limits]\nmemory_mib = 2\nfuel = 100000\nmax_output_bytes = 16\n";
    let (_dir, registry) = loaded(config(), Some(manifest));
    let err = call(&registry, "grow", "{}").await.unwrap_err();
    assert!(
        matches!(&err, ToolError::LimitExceeded { limit: Limit::Memory { bytes }, message, .. }
            if *bytes == 2 << 20 && message.starts_with("the plugin tried to grow its memory to 2.1 MiB, over its 2 MiB limit")),
        "{err:?}"
    );
    let err = call(&registry, "spin", "{}").await.unwrap_err();
    assert!(
        matches!(
            &err,
            ToolError::LimitExceeded {
                limit: Limit::Fuel { units: 100_000 },
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(
        call(&registry, "echo", r#"{"text":"0123456789"}"#).await,
        Err(ToolError::LimitExceeded {
            tool: "echo".into(),
            limit: Limit::Output { bytes: 16 },
            message: "the plugin returned 21 bytes of result JSON, over its limit of 16 bytes; ask for less (a smaller range, a narrower query)".into()
        })
    );
    assert!(call(&registry, "echo", "{}").await.is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_calls_all_succeed_in_both_modes() {
    for fresh in [true, false] {
        let config = PluginHostConfig {
            fresh_instance_per_call: fresh,
            ..config()
        };
        let (_dir, registry) = loaded(config, None);
        let registry = Arc::new(registry);
        let mut calls = tokio::task::JoinSet::new();
        for i in 0..16 {
            let registry = Arc::clone(&registry);
            calls.spawn(async move { call(&registry, "echo", &format!("{{\"i\":{i}}}")).await });
        }
        let mut seen = Vec::new();
        while let Some(result) = calls.join_next().await {
            let content = result.unwrap().unwrap().content;
            seen.push(content["i"].as_u64().unwrap());
        }
        seen.sort_unstable();
        assert_eq!(seen, (0..16).collect::<Vec<_>>(), "fresh={fresh}");
        // A trap discards the instance; the next call gets a working one.
        assert!(call(&registry, "crash", "{}").await.is_err());
        assert!(call(&registry, "echo", "{}").await.is_ok());
    }
}

#[test]
fn a_second_host_loads_from_the_cache() {
    let cache = tempfile::tempdir().unwrap();
    let (_dir, wasm) = plugin_dir(None);
    let config = || PluginHostConfig {
        cache_dir: Some(cache.path().to_owned()),
        ..config()
    };
    let first = PluginHost::new(config()).unwrap();
    let loaded = first.load_file(&wasm, &Registry::new()).unwrap();
    assert!(
        matches!(loaded.compile, CompileSource::Compiled(_)),
        "{:?}",
        loaded.compile
    );
    let second = PluginHost::new(config()).unwrap();
    let registry = Registry::new();
    let loaded = second.load_file(&wasm, &registry).unwrap();
    assert!(
        matches!(loaded.compile, CompileSource::CacheHit(_)),
        "{:?}",
        loaded.compile
    );
    assert_eq!(registry.len(), fixture::TOOLS.len());
}

#[test]
fn deny_by_default_refuses_a_plugin_asking_for_files() {
    let manifest = "[grants]\nfiles = \"read\"\n";
    let (_dir, wasm) = plugin_dir(Some(manifest));
    let registry = Registry::new();
    let host = PluginHost::new(config()).unwrap();
    let err = host.load_file(&wasm, &registry).unwrap_err();
    assert!(
        matches!(
            err.kind(),
            PluginErrorKind::GrantDenied {
                asked: FileAccess::Read,
                allowed: FileAccess::None,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(registry.is_empty());
    let info = host.inspect(&wasm).unwrap();
    assert_eq!((info.grants, info.grant_allowed), (FileAccess::Read, false));

    let allowing = PluginHost::new(PluginHostConfig {
        max_file_access: FileAccess::Read,
        ..config()
    })
    .unwrap();
    let plugin = allowing.load_file(&wasm, &registry).unwrap();
    assert_eq!(plugin.grants, FileAccess::Read);
}

#[test]
fn manifest_limits_apply_within_the_maximum() {
    let (_dir, wasm) = plugin_dir(Some("[limits]\ntimeout_ms = 1500\nmemory_mib = 16\n"));
    let host = PluginHost::new(config()).unwrap();
    let plugin = host.load_file(&wasm, &Registry::new()).unwrap();
    assert_eq!(plugin.limits.timeout, Duration::from_millis(1500));
    assert_eq!(plugin.limits.memory_bytes, 16 << 20);

    let (_dir, wasm) = plugin_dir(Some("[limits]\nmemory_mib = 1024\n"));
    let err = host.load_file(&wasm, &Registry::new()).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "{}: the manifest asks for memory 1 GiB, above the host's maximum of 64 MiB; lower it in the manifest, or have the operator raise the maximum (--plugin-max-memory 1GiB, PluginHostConfig::max_limits)",
            wasm.with_extension("toml").display()
        )
    );
}

#[test]
fn the_manifests_task_settings_reach_every_tool() {
    use toolhost::registry::TaskSupport;
    let (_dir, wasm) = plugin_dir(Some(
        "task_support = \"optional\"\n[limits]\ntask_timeout_ms = 90000\n",
    ));
    let registry = Registry::new();
    PluginHost::new(config())
        .unwrap()
        .load_file(&wasm, &registry)
        .unwrap();
    let definitions = registry.definitions();
    assert_eq!(definitions.len(), fixture::TOOLS.len());
    for definition in &definitions {
        assert_eq!(
            definition.task_support,
            TaskSupport::Optional,
            "{}",
            definition.name
        );
        assert_eq!(definition.task_timeout, Some(Duration::from_secs(90)));
    }
    // No manifest: MCP's default, no task.
    let (_dir, wasm) = plugin_dir(None);
    let registry = Registry::new();
    PluginHost::new(config())
        .unwrap()
        .load_file(&wasm, &registry)
        .unwrap();
    assert!(registry
        .definitions()
        .iter()
        .all(|d| d.task_support == TaskSupport::Forbidden && d.task_timeout.is_none()));
}

#[test]
fn inspect_reports_tools_imports_and_exports() {
    let (_dir, wasm) = plugin_dir(None);
    let info = PluginHost::new(config()).unwrap().inspect(&wasm).unwrap();
    let names: Vec<&str> = info.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, fixture::TOOLS);
    assert_eq!(info.exports, ["toolhost:plugin/tools@0.1.0"]);
    assert!(
        info.imports
            .iter()
            .all(|name| name.starts_with("toolhost:plugin/")),
        "{:?}",
        info.imports
    );
    assert_eq!((info.grants, info.grant_allowed), (FileAccess::None, true));
}

/// Writes `files` into a fresh directory and loads it.
fn load_dir_of(files: &[(&str, &[u8])], registry: &Registry) -> (tempfile::TempDir, LoadReport) {
    let dir = tempfile::tempdir().unwrap();
    for (name, bytes) in files {
        std::fs::write(dir.path().join(name), bytes).unwrap();
    }
    let report = PluginHost::new(config())
        .unwrap()
        .load_dir(dir.path(), registry);
    (dir, report)
}

fn failure<'a>(report: &'a LoadReport, file: &str) -> &'a PluginError {
    &report
        .failed
        .iter()
        .find(|f| f.path.file_name().is_some_and(|n| n == file))
        .unwrap_or_else(|| panic!("{file} did not fail: {report:?}"))
        .error
}

#[test]
fn broken_files_fail_by_name_and_the_rest_load() {
    let registry = Registry::new();
    let core_module = b"\0asm\x01\0\0\0";
    let empty_component = b"\0asm\x0d\0\x01\0";
    let (_dir, report) = load_dir_of(
        &[
            ("a_text.wasm", b"hello"),
            ("b_core.wasm", core_module),
            ("c_empty.wasm", empty_component),
            ("d_fx.wasm", standard()),
            ("e_garbled.wasm", b"\0asm\x0d\0\x01\0\xff\xff"),
            ("notes.txt", b"ignored"),
        ],
        &registry,
    );
    let loaded: Vec<&str> = report.loaded.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(loaded, ["d_fx"]);
    let failed: Vec<String> = report
        .failed
        .iter()
        .map(|f| f.path.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        failed,
        [
            "a_text.wasm",
            "b_core.wasm",
            "c_empty.wasm",
            "e_garbled.wasm"
        ]
    );
    for failure in &report.failed {
        assert!(failure
            .error
            .to_string()
            .starts_with(&failure.path.display().to_string()));
    }
    assert!(matches!(
        failure(&report, "a_text.wasm").kind(),
        PluginErrorKind::NotAComponent { .. }
    ));
    let core = failure(&report, "b_core.wasm").to_string();
    assert!(
        core.contains(
            "it is a core WebAssembly module; build the plugin for the wasm32-wasip2 target"
        ),
        "{core}"
    );
    let wrong = failure(&report, "c_empty.wasm");
    assert!(
        matches!(wrong.kind(), PluginErrorKind::WrongWorld { .. }),
        "{wrong:?}"
    );
    assert!(
        wrong
            .to_string()
            .contains("does not implement the toolhost:plugin `plugin` world (0.3.0, 0.2.0 or 0.1.0): no exported instance named `toolhost:plugin/tools@0.3.0`"),
        "{wrong}"
    );
    assert!(matches!(
        failure(&report, "e_garbled.wasm").kind(),
        PluginErrorKind::Compile { .. }
    ));
    assert_eq!(registry.names(), fixture::TOOLS);
}

#[test]
fn a_taken_name_refuses_the_whole_plugin() {
    let registry = Registry::new();
    let other = fixture::component(&[
        ("zeta", fixture::EMPTY_SCHEMA),
        ("echo", fixture::EMPTY_SCHEMA),
    ]);
    let (_dir, report) = load_dir_of(
        &[("a_fx.wasm", standard()), ("b_other.wasm", &other)],
        &registry,
    );
    let err = failure(&report, "b_other.wasm");
    assert!(
        matches!(err.kind(), PluginErrorKind::DuplicateTool { name, .. } if name == "echo"),
        "{err:?}"
    );
    assert!(
        !registry.has("zeta"),
        "all or nothing: zeta must not be registered"
    );
}

#[test]
fn invalid_definitions_are_load_errors() {
    let cases: &[(&[(&str, &str)], &str)] = &[
        (
            &[("bad name", fixture::EMPTY_SCHEMA)],
            "tool definition \"bad name\" is invalid: tool name \"bad name\" is not valid",
        ),
        (
            &[("t", "{oops")],
            "tool definition \"t\" is invalid: parameters are not valid JSON",
        ),
        (
            &[("t", "[1]")],
            "tool definition \"t\" is invalid: parameters must be a JSON Schema object",
        ),
        (
            &[("t", r#"{"type":"string"}"#)],
            "tool definition \"t\" is invalid: parameters have \"type\": \"string\"",
        ),
        (
            &[("t", fixture::EMPTY_SCHEMA), ("t", fixture::EMPTY_SCHEMA)],
            "declares tool \"t\", but the plugin declares it twice",
        ),
        (&[], "the plugin declares no tools"),
    ];
    for (definitions, expected) in cases {
        let registry = Registry::new();
        let bytes = fixture::component(definitions);
        let (_dir, report) = load_dir_of(&[("p.wasm", &bytes)], &registry);
        let err = failure(&report, "p.wasm").to_string();
        assert!(err.contains(expected), "{err}\nexpected: {expected}");
        assert!(registry.is_empty());
    }
}

#[test]
fn an_unreadable_definitions_answer_is_a_load_error() {
    let registry = Registry::new();
    let (_dir, report) = load_dir_of(&[("p.wasm", &fixture::broken_definitions())], &registry);
    let err = failure(&report, "p.wasm");
    assert!(
        matches!(err.kind(), PluginErrorKind::Definitions { .. }),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(
        text.contains("p.wasm: asking the plugin for its tool definitions failed: it crashed: "),
        "{text}"
    );
    assert!(text.contains("out of bounds"), "{text}");
    assert!(registry.is_empty());
}

#[test]
fn a_missing_directory_is_one_failure() {
    let host = PluginHost::new(config()).unwrap();
    let report = host.load_dir(Path::new("/nonexistent/plugins"), &Registry::new());
    assert!(report.loaded.is_empty());
    assert!(matches!(
        report.failed[0].error.kind(),
        PluginErrorKind::Io { .. }
    ));
}

#[test]
fn defaults_above_the_maximum_are_refused() {
    let err = PluginHost::new(PluginHostConfig {
        default_limits: PluginLimits {
            timeout: Duration::from_secs(120),
            ..PluginLimits::default()
        },
        ..config()
    })
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "the plugin host cannot start: the default timeout limit (120s) is above the maximum (10s); raise max_limits or lower default_limits"
    );
}

/// Why a server shared by several principals runs a fresh instance per call (the
/// default, and all the CLI does): a reused instance carries a plugin's statics from
/// one call to the next, whoever made it. An embedder that turns reuse on must give
/// each principal a `PluginHost` (an instance pool) of its own.
#[tokio::test]
async fn reused_instances_carry_a_plugins_state_from_call_to_call_fresh_ones_do_not() {
    for fresh in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        toolhost_tests::install(dir.path(), &["hostile_state"]).unwrap();
        let host = PluginHost::new(PluginHostConfig {
            fresh_instance_per_call: fresh,
            ..config()
        })
        .unwrap();
        let registry = Registry::new();
        host.load_file(&dir.path().join("hostile_state.wasm"), &registry)
            .unwrap();
        let first = call(&registry, "hostile_state", r#"{"value":"alice's secret"}"#)
            .await
            .unwrap();
        assert_eq!(first.content, "nothing kept", "fresh={fresh}");
        let second = call(&registry, "hostile_state", r#"{"value":"bob's"}"#)
            .await
            .unwrap();
        let expected = if fresh {
            "nothing kept"
        } else {
            "alice's secret"
        };
        assert_eq!(second.content, expected, "fresh={fresh}");
    }
}
