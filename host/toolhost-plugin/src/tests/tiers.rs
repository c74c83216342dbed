//! Quick code first ([`CompileTiers::QuickFirst`]): a plugin serves on quick code, under
//! every limit, with exactly the results of its optimized code; the optimized code is
//! compiled in the background, cached and swapped in; a plugin gone before its turn,
//! or one that never registered, costs no optimized compile.

use super::*;

/// A host that loads on quick code first, over `cache` (none: `None`), with its
/// background compiles held until the test releases them.
fn quick_first(cache: Option<&Path>, fresh: bool) -> PluginHost {
    let host = PluginHost::new(PluginHostConfig {
        cache_dir: cache.map(Path::to_owned),
        compile_tiers: CompileTiers::QuickFirst,
        fresh_instance_per_call: fresh,
        ..config()
    })
    .unwrap();
    host.optimizer.hold();
    host
}

/// What every tool of the standard fixture answers, in order.
async fn answers(registry: &Registry) -> Vec<Result<ToolResult, ToolError>> {
    let mut answers = Vec::new();
    for tool in fixture::TOOLS {
        answers.push(call(registry, tool, r#"{"text":"0123456789"}"#).await);
    }
    answers
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quick_code_serves_under_every_limit_with_the_optimized_codes_answers() {
    let cache = tempfile::tempdir().unwrap();
    // Wall time, memory and output limits on the epoch-only engines; fuel on the others.
    for manifest in [
        "[limits]\ntimeout_ms = 200\nmemory_mib = 2\nmax_output_bytes = 16\n",
        "[limits]\nmemory_mib = 2\nfuel = 100000\n",
    ] {
        let (_dir, wasm) = plugin_dir(Some(manifest));
        let host = quick_first(Some(cache.path()), true);
        let registry = Registry::new();
        let loaded = host.load_file(&wasm, &registry).unwrap();
        assert!(
            matches!(loaded.compile, CompileSource::Quick(_)),
            "{:?}",
            loaded.compile
        );
        assert_eq!(host.optimizing(), 1);
        let on_quick = answers(&registry).await;
        assert_eq!(host.optimizer.swapped(), 0, "{manifest}: still quick code");
        // Every limit holds on quick code: the time limit, the memory cap, fuel, output.
        let limited =
            |tool: &str| &on_quick[fixture::TOOLS.iter().position(|t| *t == tool).unwrap()];
        if manifest.contains("fuel") {
            assert!(
                matches!(
                    limited("spin"),
                    Err(ToolError::LimitExceeded {
                        limit: Limit::Fuel { units: 100_000 },
                        ..
                    })
                ),
                "{:?}",
                limited("spin")
            );
        } else {
            assert_eq!(
                limited("spin"),
                &Err(ToolError::TimedOut {
                    tool: "spin".into(),
                    limit: Duration::from_millis(200)
                })
            );
            assert!(
                matches!(
                    limited("echo"),
                    Err(ToolError::LimitExceeded {
                        limit: Limit::Output { bytes: 16 },
                        ..
                    })
                ),
                "{:?}",
                limited("echo")
            );
        }
        assert!(
            matches!(limited("grow"), Err(ToolError::LimitExceeded { limit: Limit::Memory { bytes }, .. }) if *bytes == 2 << 20),
            "{:?}",
            limited("grow")
        );
        assert_eq!(
            limited("deep"),
            &Err(ToolError::ToolPanicked {
                tool: "deep".into(),
                message: "wasm trap: call stack exhausted".into()
            })
        );

        host.optimizer.release();
        assert!(host.wait_for_optimized(Duration::from_secs(60)));
        assert_eq!(host.optimizing(), 0);
        assert_eq!(host.optimizer.swapped(), 1, "{manifest}: swapped in");
        assert_eq!(answers(&registry).await, on_quick, "{manifest}");

        // Stored for the next start, which loads the optimized code from the cache.
        let again = PluginHost::new(PluginHostConfig {
            cache_dir: Some(cache.path().to_owned()),
            compile_tiers: CompileTiers::QuickFirst,
            ..config()
        })
        .unwrap();
        let registry = Registry::new();
        let loaded = again.load_file(&wasm, &registry).unwrap();
        assert!(
            matches!(loaded.compile, CompileSource::CacheHit(_)),
            "{manifest}: {:?}",
            loaded.compile
        );
        assert_eq!(again.optimizing(), 0, "nothing to optimize on a hit");
        assert_eq!(answers(&registry).await, on_quick, "{manifest}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_instances_of_quick_code_are_dropped_when_the_optimized_code_arrives() {
    let (_dir, wasm) = plugin_dir(None);
    let host = quick_first(None, false);
    let registry = Registry::new();
    host.load_file(&wasm, &registry).unwrap();
    assert_eq!(
        call(&registry, "echo", r#"{"a":1}"#).await.unwrap().content,
        serde_json::json!({"a": 1})
    );
    assert_eq!(host.shared.idle(), 1, "the quick instance waits for reuse");
    host.optimizer.release();
    assert!(host.wait_for_optimized(Duration::from_secs(60)));
    assert_eq!(host.optimizer.swapped(), 1);
    assert_eq!(host.shared.idle(), 0, "the quick instance was dropped");
    assert_eq!(
        call(&registry, "echo", r#"{"a":2}"#).await.unwrap().content,
        serde_json::json!({"a": 2})
    );
    assert_eq!(host.shared.idle(), 1, "an optimized instance now");
}

#[test]
fn a_plugin_replaced_before_its_turn_is_not_compiled_again() {
    let cache = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let wasm = dir.path().join("fx.wasm");
    let first = fixture::component(&[("one", fixture::EMPTY_SCHEMA)]);
    let second = fixture::component(&[("two", fixture::EMPTY_SCHEMA)]);
    std::fs::write(&wasm, &first).unwrap();
    let host = quick_first(Some(cache.path()), true);
    let registry = Registry::new();
    host.load_file(&wasm, &registry).unwrap();
    std::fs::write(&wasm, &second).unwrap();
    host.reload_file(&wasm, &["one".to_owned()], &registry, None)
        .unwrap();
    assert_eq!(registry.names(), ["two"]);
    assert_eq!(host.optimizing(), 2);
    host.optimizer.release();
    assert!(host.wait_for_optimized(Duration::from_secs(60)));
    assert_eq!(host.optimizer.swapped(), 1, "only the version still loaded");
    let entry = |bytes: &[u8]| host.plain.cache.entry(bytes).unwrap();
    assert!(
        !entry(&first).exists(),
        "the replaced version was not compiled"
    );
    assert!(entry(&second).is_file());
}

#[test]
fn a_plugin_that_does_not_register_queues_no_optimized_compile() {
    // `echo` is taken (by a plugin another host loaded).
    let (_standard_dir, standard_wasm) = plugin_dir(None);
    let registry = Registry::new();
    PluginHost::new(config())
        .unwrap()
        .load_file(&standard_wasm, &registry)
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let broken = dir.path().join("broken.wasm");
    std::fs::write(&broken, fixture::broken_definitions()).unwrap();
    let taken = dir.path().join("taken.wasm");
    std::fs::write(
        &taken,
        fixture::component(&[("echo", fixture::EMPTY_SCHEMA)]),
    )
    .unwrap();
    let host = quick_first(None, true);
    for wasm in [&broken, &taken] {
        assert!(host.load_file(wasm, &registry).is_err());
    }
    assert_eq!(host.optimizing(), 0);
    // Inspecting compiles optimized code (nothing is served from it) and queues nothing.
    let info = host.inspect(&taken).unwrap();
    assert!(
        matches!(info.compile, CompileSource::Compiled(_)),
        "{:?}",
        info.compile
    );
    assert_eq!(host.optimizing(), 0);
    assert!(host.wait_for_optimized(Duration::ZERO));
}
