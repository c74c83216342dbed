//! Which engine a call runs on: the fuel engine only for plugins with a fuel limit, and
//! the engine shards under one concurrency limit.

use super::*;

/// Fuel checks are compiled only into plugins whose limits ask for fuel, on a second
/// engine built for the first of them; a plugin without one never pays for them, and one
/// with one is always metered, also when both are loaded by one host and served from one
/// compile cache (each engine's entries are its own).
#[tokio::test]
async fn only_a_plugin_with_a_fuel_limit_runs_on_the_fuel_engine() {
    let cache = tempfile::tempdir().unwrap();
    let config = || PluginHostConfig {
        cache_dir: Some(cache.path().to_owned()),
        ..config()
    };
    let (_plain_dir, plain) = plugin_dir(Some("[limits]\ntimeout_ms = 300\n"));
    let (_fueled_dir, fueled) = plugin_dir(Some("[limits]\ntimeout_ms = 300\nfuel = 100000\n"));
    for round in 0..2 {
        let host = PluginHost::new(config()).unwrap();
        let (plain_registry, fueled_registry) = (Registry::new(), Registry::new());
        let loaded = host.load_file(&plain, &plain_registry).unwrap();
        assert!(
            host.fueled.get().is_none(),
            "round {round}: built for no fuel"
        );
        assert_eq!(
            matches!(loaded.compile, CompileSource::CacheHit(_)),
            round == 1,
            "round {round}: {:?}",
            loaded.compile
        );
        let loaded = host.load_file(&fueled, &fueled_registry).unwrap();
        assert!(host.fueled.get().is_some(), "round {round}");
        // The fuel engine's code is cached under its own key: a hit in the second
        // round, never the plain engine's artifact.
        assert_eq!(
            matches!(loaded.compile, CompileSource::CacheHit(_)),
            round == 1,
            "round {round}: {:?}",
            loaded.compile
        );

        let err = call(&fueled_registry, "spin", "{}").await.unwrap_err();
        assert!(
            matches!(
                &err,
                ToolError::LimitExceeded {
                    limit: Limit::Fuel { units: 100_000 },
                    ..
                }
            ),
            "round {round}: {err:?}"
        );
        let err = call(&plain_registry, "spin", "{}").await.unwrap_err();
        assert!(
            matches!(&err, ToolError::TimedOut { .. }),
            "round {round}: {err:?}"
        );
        for registry in [&plain_registry, &fueled_registry] {
            let result = call(registry, "echo", r#"{"a":1}"#).await.unwrap();
            assert_eq!(result.content, serde_json::json!({"a": 1}));
        }
    }
    // One entry per engine.
    let entries = std::fs::read_dir(cache.path())
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.path().extension().is_some_and(|x| x == "cwasm"))
        .count();
    assert_eq!(entries, 2);
}

/// Reuse mode with every idle instance on one shard: two calls at once still run on two
/// shards (the second makes a new instance on an idle shard rather than take the idle
/// instance beside the first call), and each takes an idle instance only on its own
/// shard.
#[test]
fn two_calls_at_once_take_two_shards_though_every_idle_instance_is_on_one() {
    let config = PluginHostConfig {
        fresh_instance_per_call: false,
        max_concurrent_calls: 4,
        ..config()
    };
    let host = PluginHost::with_shards(config, 3).unwrap();
    let (_dir, wasm) = plugin_dir(None);
    let runtime = host.compile_runtime(&wasm).unwrap();
    // A thread of its own: which shard it used last plays no part.
    std::thread::spawn(move || {
        runtime.checkin(runtime.new_instance(0));
        runtime.checkin(runtime.new_instance(0));
        assert_eq!(host.shared.idle(), 2);

        let (first, first_instance) = runtime.checkout();
        let (second, second_instance) = runtime.checkout();
        assert_eq!(host.shared.running_per_shard(), vec![1, 1, 0]);
        assert_eq!((first.shard(), first_instance.shard), (0, 0));
        assert_eq!((second.shard(), second_instance.shard), (1, 1));
        assert_eq!(
            host.shared.idle(),
            1,
            "the first took one, the second a new one"
        );

        // The third goes to the idle shard 2 (a new instance), not to the one idle
        // instance on the busy shard 0.
        let (third, third_instance) = runtime.checkout();
        assert_eq!((third.shard(), third_instance.shard), (2, 2));
        assert_eq!(host.shared.idle(), 1);
        drop((first, second, third));
        assert_eq!(host.shared.running_per_shard(), vec![0, 0, 0]);
        for instance in [first_instance, second_instance, third_instance] {
            runtime.checkin(instance);
        }
        assert_eq!(host.shared.idle(), 4);

        // All idle on one tie: the call goes where an idle instance waits, this thread's
        // last shard (2) first.
        let (fourth, fourth_instance) = runtime.checkout();
        assert_eq!((fourth.shard(), fourth_instance.shard), (2, 2));
        assert_eq!(host.shared.idle(), 3, "reused, not made");
    })
    .join()
    .unwrap();
}

/// Calls run on every engine shard, and the one concurrency limit holds across them:
/// with 3 shards and 2 calls at once, three spinning calls run two at a time, on two
/// different shards, and the third waits (and times out) without an instance.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_spread_over_the_engine_shards_under_one_concurrency_limit() {
    let config = PluginHostConfig {
        max_concurrent_calls: 2,
        ..config()
    };
    let host = PluginHost::with_shards(config, 3).unwrap();
    assert_eq!(host.plain.shards.len(), 3);
    let (_dir, wasm) = plugin_dir(Some("[limits]\ntimeout_ms = 1500\n"));
    let registry = Arc::new(Registry::new());
    host.load_file(&wasm, &registry).unwrap();

    let mut calls = tokio::task::JoinSet::new();
    for i in 0..12 {
        let registry = Arc::clone(&registry);
        calls.spawn(async move { call(&registry, "echo", &format!("{{\"i\":{i}}}")).await });
    }
    let mut seen = Vec::new();
    while let Some(result) = calls.join_next().await {
        seen.push(result.unwrap().unwrap().content["i"].as_u64().unwrap());
    }
    seen.sort_unstable();
    assert_eq!(seen, (0..12).collect::<Vec<_>>());

    let started = Instant::now();
    let spins: Vec<_> = (0..3)
        .map(|_| {
            let registry = Arc::clone(&registry);
            tokio::spawn(async move { call(&registry, "spin", "{}").await })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let running = host.shared.running_per_shard();
    assert!(
        started.elapsed() < Duration::from_millis(1400),
        "too slow a machine to observe: {:?}",
        started.elapsed()
    );
    assert_eq!(running.iter().sum::<u32>(), 2, "{running:?}");
    assert!(running.iter().all(|&calls| calls <= 1), "{running:?}");
    for spin in spins {
        let err = spin.await.unwrap().unwrap_err();
        assert!(matches!(err, ToolError::TimedOut { .. }), "{err:?}");
    }
    assert_eq!(host.shared.running_per_shard(), vec![0, 0, 0]);
}

/// The pool's use as the metrics read it: calls holding a place, idle instances kept.
#[test]
fn calls_running_and_idle_instances_count_what_holds_the_pool() {
    let config = PluginHostConfig {
        fresh_instance_per_call: false,
        max_concurrent_calls: 4,
        ..config()
    };
    let host = PluginHost::with_shards(config, 1).unwrap();
    assert_eq!((host.calls_running(), host.idle_instances()), (0, 0));
    let first = host.shared.slots.try_acquire().unwrap();
    let second = host.shared.slots.try_acquire().unwrap();
    assert_eq!(host.calls_running(), 2);
    drop(first);
    assert_eq!(host.calls_running(), 1);
    drop(second);
    let (_dir, wasm) = plugin_dir(None);
    let runtime = host.compile_runtime(&wasm).unwrap();
    runtime.checkin(runtime.new_instance(0));
    assert_eq!((host.calls_running(), host.idle_instances()), (0, 1));
}
