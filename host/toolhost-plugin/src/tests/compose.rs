//! The `registry` import against a hostile plugin (`hostile_compose`): the grant needs
//! the operator's `--plugin-tools` too, a call makes at most `max_tool_calls`, composing
//! tools (its own, another composing plugin's) are neither offered nor callable, nested
//! calls get the registry's argument checks and result cap, and end by the caller's
//! deadline; a nested plugin call runs inside its caller's concurrency slot.

use serde_json::{json, Value};
use toolhost::registry::{Arguments, ToolDefinition};

use super::*;
use crate::manifest::ToolNames;

/// The manifest of the second composing plugin, `b` (the same component).
const B_MANIFEST: &str = "namespace = \"b\"\n[grants]\ntools = \"*\"\n";

/// A registry holding native `greet`, `big` (1 MiB of text) and `slow` (10 s) tools,
/// `hostile_compose` with `manifest` (its own when `None`), another composing plugin `b`
/// and `greet.wasm`, the operator allowing `allowed`.
fn compose_registry(
    manifest: Option<&str>,
    allowed: Option<ToolNames>,
    builder: impl FnOnce(&mut crate::PluginHostConfigBuilder),
) -> (tempfile::TempDir, Registry) {
    let dir = tempfile::tempdir().unwrap();
    toolhost_tests::install(dir.path(), &["hostile_compose", "greet"]).unwrap();
    if let Some(manifest) = manifest {
        std::fs::write(dir.path().join("hostile_compose.toml"), manifest).unwrap();
    }
    std::fs::copy(
        toolhost_tests::plugin("hostile_compose").wasm,
        dir.path().join("b.wasm"),
    )
    .unwrap();
    std::fs::write(dir.path().join("b.toml"), B_MANIFEST).unwrap();
    let mut config = config().to_builder();
    config.plugin_tools(allowed);
    builder(&mut config);
    let host = PluginHost::new(config.build()).unwrap();
    let registry = Registry::new();
    let object = json!({"type": "object"});
    registry
        .register(
            ToolDefinition::new(
                "hello",
                "Greets natively.",
                json!({"type": "object", "required": ["name"]}),
            ),
            |_ctx: CallContext, args: Arguments, _env: Environment| async move {
                Ok(ToolResult::new(format!(
                    "Hello, {}!",
                    args.required_str("name")?
                )))
            },
        )
        .unwrap();
    registry
        .register(
            ToolDefinition::new("big", "1 MiB of text.", object.clone()),
            |_ctx: CallContext, _args: Arguments, _env: Environment| async move {
                Ok(ToolResult::new("x".repeat(1 << 20)))
            },
        )
        .unwrap();
    registry
        .register(
            ToolDefinition::new("slow", "Takes 10 s.", object),
            |_ctx: CallContext, _args: Arguments, _env: Environment| async move {
                tokio::time::sleep(Duration::from_secs(10)).await;
                Ok(ToolResult::new("late"))
            },
        )
        .unwrap();
    for plugin in ["hostile_compose", "b", "greet"] {
        host.load_file(&dir.path().join(format!("{plugin}.wasm")), &registry)
            .unwrap();
    }
    (dir, registry)
}

const ALL_MANIFEST: &str = "[grants]\ntools = \"*\"\n";

async fn run(registry: &Registry, tool: &str, arguments: Value) -> Result<Value, ToolError> {
    call(registry, tool, &arguments.to_string())
        .await
        .map(|result| result.content)
}

#[tokio::test]
async fn ten_thousand_nested_calls_stop_at_max_tool_calls_with_the_limit_named() {
    // The plugin's own manifest: max_tool_calls = 40, `greet` among its tools.
    let (_dir, registry) = compose_registry(None, Some(ToolNames::All), |_| {});
    let result = run(
        &registry,
        "flood",
        json!({"tool": "greet", "arguments": r#"{"name":"Ada"}"#, "times": 10_000}),
    )
    .await
    .unwrap();
    assert_eq!(result["ok"], 40);
    assert_eq!(result["errors"], 9_960);
    let limit = "greet: this call already made 40 tool calls, the most plugin hostile_compose's grant allows per call (`[grants] max_tool_calls` = 40); make fewer calls";
    assert_eq!(result["first_error"], limit);
    assert_eq!(result["last_error"], limit);
    // The next call has its own 40.
    let again = run(
        &registry,
        "flood",
        json!({"tool": "greet", "arguments": r#"{"name":"Ada"}"#, "times": 3}),
    )
    .await
    .unwrap();
    assert_eq!(
        again,
        json!({"ok": 3, "errors": 0, "first_error": null, "last_error": null})
    );
}

#[tokio::test]
async fn a_tool_is_called_only_when_the_manifest_and_the_operator_both_name_it() {
    // The manifest names greet, not hello; the operator allows hello and greet.
    let allowed = ToolNames::only(["hello", "greet"]);
    let (_dir, registry) = compose_registry(None, Some(allowed), |_| {});
    let listed = run(&registry, "list", json!({})).await.unwrap();
    assert_eq!(listed, json!({"tools": ["greet"]}));
    let greeted = run(
        &registry,
        "call_once",
        json!({"tool": "greet", "arguments": r#"{"name":"Ada"}"#}),
    )
    .await
    .unwrap();
    assert_eq!(greeted, json!({"result": "Hello, Ada!"}));
    let refused = run(
        &registry,
        "call_once",
        json!({"tool": "hello", "arguments": r#"{"name":"Ada"}"#}),
    )
    .await
    .unwrap();
    assert_eq!(refused["error"], "failed");
    assert_eq!(
        refused["message"],
        "hello: tool hello is not granted to plugin hostile_compose: its manifest must name it in `[grants] tools` and the operator must allow it (`--plugin-tools hello`); it may call: greet"
    );

    // Without the operator's flag: nothing listed, every call refused.
    let (_dir, registry) = compose_registry(None, None, |_| {});
    assert_eq!(
        run(&registry, "list", json!({})).await.unwrap(),
        json!({"tools": []})
    );
    let refused = run(
        &registry,
        "call_once",
        json!({"tool": "greet", "arguments": r#"{"name":"Ada"}"#}),
    )
    .await
    .unwrap();
    assert_eq!(
        refused["message"],
        "greet: tool greet is not granted to plugin hostile_compose: its manifest must name it in `[grants] tools` and the operator must allow it (`--plugin-tools greet`); it may call: (none)"
    );
}

#[tokio::test]
async fn composing_tools_are_neither_offered_nor_callable_its_own_included() {
    let (_dir, registry) = compose_registry(Some(ALL_MANIFEST), Some(ToolNames::All), |_| {});
    let listed = run(&registry, "list", json!({})).await.unwrap();
    // The natives and greet.wasm's tool; none of hostile_compose's or b's.
    assert_eq!(listed, json!({"tools": ["hello", "big", "slow", "greet"]}));
    for tool in ["list", "flood", "b_list", "b_call_once"] {
        let refused = run(
            &registry,
            "call_once",
            json!({"tool": tool, "arguments": "{}"}),
        )
        .await
        .unwrap();
        assert_eq!(refused["error"], "failed", "{tool}");
        assert_eq!(
            refused["message"],
            format!("{tool}: tool {tool} composes other tools itself, so it cannot be called from a composing tool (no recursion); call it directly"),
        );
    }
}

#[tokio::test]
async fn deeply_nested_arguments_of_a_nested_call_meet_the_registrys_argument_checks() {
    let (_dir, registry) = compose_registry(Some(ALL_MANIFEST), Some(ToolNames::All), |_| {});
    let result = run(
        &registry,
        "deep",
        json!({"tool": "hello", "depth": 100_000}),
    )
    .await
    .unwrap();
    assert_eq!(result["error"], "invalid-arguments");
    let message = result["message"].as_str().unwrap();
    assert!(message.contains("recursion limit exceeded"), "{message}");
    // A missing required argument: the registry's check, as for a direct call.
    let missing = run(
        &registry,
        "call_once",
        json!({"tool": "hello", "arguments": "{}"}),
    )
    .await
    .unwrap();
    let direct = call(&registry, "hello", "{}").await.unwrap_err();
    assert_eq!(
        missing,
        json!({"error": "invalid-arguments", "message": direct.to_string()})
    );
}

#[tokio::test]
async fn nested_arguments_over_four_mebibytes_are_refused_before_dispatch() {
    let (_dir, registry) = compose_registry(Some(ALL_MANIFEST), Some(ToolNames::All), |_| {});
    let arguments =
        json!({"name": "x".repeat(crate::host::tools::MAX_NESTED_ARGUMENT_BYTES)}).to_string();
    let result = run(
        &registry,
        "call_once",
        json!({"tool": "hello", "arguments": arguments}),
    )
    .await
    .unwrap();
    assert_eq!(result["error"], "invalid-arguments", "{result}");
    let message = result["message"].as_str().unwrap();
    assert!(
        message.contains("over the 4194304 bytes a nested call may pass"),
        "{message}"
    );
}

#[tokio::test]
async fn a_megabyte_result_per_nested_call_in_a_loop_is_held_to_the_result_cap() {
    // 1,000 nested calls take ~1.7 s in a debug build; the default 10 s limit was hit
    // with the whole suite and other builds on two cores. This test is about the cap.
    let (_dir, registry) = compose_registry(Some(ALL_MANIFEST), Some(ToolNames::All), |c| {
        let limits = crate::PluginLimits::default().with_timeout(Duration::from_secs(60));
        c.max_limits(limits.clone()).default_limits(limits);
    });
    let result = run(
        &registry,
        "big_loop",
        json!({"tool": "big", "arguments": "{}", "times": 1000}),
    )
    .await
    .unwrap();
    // 64 calls at most; none of 1 MiB gets through the registry's 64 KiB cap.
    assert_eq!(result["ok"], 0);
    assert_eq!(result["bytes"], 0);
    assert_eq!(result["errors"], 1000);
    let first = result["first_error"].as_str().unwrap();
    let direct = call(&registry, "big", "{}").await.unwrap_err();
    assert!(
        matches!(direct, ToolError::ResultTooLarge { .. }),
        "{direct:?}"
    );
    assert_eq!(first, direct.to_string());
}

#[tokio::test]
async fn a_nested_call_ends_by_the_callers_deadline_not_its_own() {
    // The plugin's limit is 1 s; `slow` takes 10 s and the registry allows it 30 s.
    let manifest = "[grants]\ntools = \"*\"\n[limits]\ntimeout_ms = 1000\n";
    let (_dir, registry) = compose_registry(Some(manifest), Some(ToolNames::All), |_| {});
    let started = Instant::now();
    let err = run(
        &registry,
        "late",
        json!({"spin_ms": 300, "tool": "slow", "arguments": "{}"}),
    )
    .await
    .unwrap_err();
    let took = started.elapsed();
    assert!(
        matches!(&err, ToolError::TimedOut { tool, .. } if tool == "late"),
        "{err:?}"
    );
    assert!(took < Duration::from_secs(5), "{took:?}");
}

#[tokio::test]
async fn a_nested_plugin_call_runs_inside_its_callers_only_slot() {
    // One call at a time host-wide: the nested greet.wasm call must not wait for a slot
    // its caller holds.
    let (_dir, registry) = compose_registry(Some(ALL_MANIFEST), Some(ToolNames::All), |config| {
        config.max_concurrent_calls(1);
    });
    let result = run(
        &registry,
        "flood",
        json!({"tool": "greet", "arguments": r#"{"name":"Ada"}"#, "times": 5}),
    )
    .await
    .unwrap();
    assert_eq!(
        result,
        json!({"ok": 5, "errors": 0, "first_error": null, "last_error": null})
    );
}

#[tokio::test]
async fn max_tool_calls_above_64_fails_the_load_and_below_1_too() {
    for (written, max) in [("65", 65), ("0", 0)] {
        let dir = tempfile::tempdir().unwrap();
        toolhost_tests::install(dir.path(), &["hostile_compose"]).unwrap();
        std::fs::write(
            dir.path().join("hostile_compose.toml"),
            format!("[grants]\ntools = \"*\"\nmax_tool_calls = {written}\n"),
        )
        .unwrap();
        let host = PluginHost::new(config()).unwrap();
        let err = host
            .load_file(&dir.path().join("hostile_compose.wasm"), &Registry::new())
            .unwrap_err();
        let message = err.to_string();
        assert!(
            message.contains(&format!(
                "grants.max_tool_calls is {max}; it must be 1 to 64 (tool calls per call of the plugin)"
            )),
            "{message}"
        );
    }
}

#[test]
fn allowing_tool_calls_reserves_a_pool_slot_per_call_for_the_nested_instance() {
    use crate::engine::PoolPlan;
    let mut config = PluginHostConfig {
        cache_dir: None,
        ..PluginHostConfig::default()
    };
    config.plugin_tools = Some(ToolNames::All);
    // Within the same 4 GiB: 32 calls, each with a slot for its nested call's instance.
    assert_eq!(
        *PluginHost::new(config.clone()).unwrap().pool(),
        PoolPlan {
            slots: 64,
            slot_memory: 64 << 20,
            total_memory: 4 << 30,
            concurrent_calls: 32,
        }
    );
    // Reuse mode: the call's, its idle one's and the nested call's.
    config.fresh_instance_per_call = false;
    let pool = *PluginHost::new(config).unwrap().pool();
    assert_eq!((pool.slots, pool.concurrent_calls), (63, 21));
}
