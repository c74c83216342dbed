//! Hot reload of real plugins (`--watch`): added, changed, broken, removed, and a call in
//! flight while its plugin is replaced.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use toolhost::registry::{CallContext, Environment, Registry, ToolCall, ToolError};
use toolhost_plugin::watch::{PluginWatcher, WatchEvent};
use toolhost_plugin::{PluginHost, PluginHostConfig, PluginLimits};

use super::common::cache_dir;

fn copy(plugin: &str, dir: &Path, as_name: &str) {
    let from = toolhost_tests::plugin(plugin).wasm;
    // Written under another name and renamed in: the watcher never sees half a file.
    let staging = dir.join(format!(".{as_name}.partial"));
    std::fs::copy(from, &staging).unwrap();
    std::fs::rename(&staging, dir.join(format!("{as_name}.wasm"))).unwrap();
}

/// A plugin host on the shared compile cache, with a 2 s call limit.
fn host() -> Arc<PluginHost> {
    Arc::new(
        PluginHost::new(
            PluginHostConfig::builder()
                .cache_dir(Some(cache_dir()))
                .default_limits(PluginLimits::default().with_timeout(Duration::from_secs(2)))
                .build(),
        )
        .unwrap(),
    )
}

/// Polls until something happens (a change is acted on at its second sighting).
fn settle(watcher: &mut PluginWatcher) -> Vec<WatchEvent> {
    for _ in 0..5 {
        let events = watcher.poll();
        if !events.is_empty() {
            return events;
        }
    }
    Vec::new()
}

async fn call(
    registry: &Registry,
    tool: &str,
    arguments: &str,
) -> Result<serde_json::Value, ToolError> {
    registry
        .dispatch(
            &CallContext::new(),
            &ToolCall::new(tool, arguments),
            &Environment::generate(),
        )
        .await
        .map(|result| result.content)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plugins_come_change_break_and_go_without_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    copy("greet", dir.path(), "greet");
    let host = host();
    let registry = Arc::new(Registry::new());
    let report = host.load_dir(dir.path(), &registry);
    assert_eq!(registry.names(), ["greet"]);
    let mut watcher = PluginWatcher::new(
        Arc::clone(&host),
        dir.path(),
        Arc::clone(&registry),
        &report,
    );
    assert!(watcher.poll().is_empty(), "nothing changed");

    // Added.
    copy("divide", dir.path(), "calc");
    let generation = registry.generation();
    let events = tokio::task::block_in_place(|| settle(&mut watcher));
    assert!(
        matches!(&events[..], [WatchEvent::Loaded(plugin)] if plugin.tools == ["divide"]),
        "{events:?}"
    );
    assert_eq!(registry.names(), ["greet", "divide"]);
    assert!(registry.generation() > generation);
    assert_eq!(
        call(&registry, "divide", r#"{"value":10,"by":4}"#)
            .await
            .unwrap(),
        json!(2.5)
    );

    // Changed: the same file now holds another plugin; its tools take divide's place.
    copy("multi", dir.path(), "calc");
    let events = tokio::task::block_in_place(|| settle(&mut watcher));
    assert!(
        matches!(&events[..], [WatchEvent::Reloaded { plugin, old_tools }] if plugin.tools == ["upper", "lower"] && old_tools == &["divide"]),
        "{events:?}"
    );
    assert_eq!(registry.names(), ["greet", "upper", "lower"]);
    assert!(matches!(
        call(&registry, "divide", "{}").await,
        Err(ToolError::UnknownTool { .. })
    ));

    // Broken: the old version keeps serving, and the reason is given.
    std::fs::write(dir.path().join("calc.wasm"), b"not a component").unwrap();
    let events = tokio::task::block_in_place(|| settle(&mut watcher));
    match &events[..] {
        [WatchEvent::Failed { serving, error, .. }] => {
            assert_eq!(serving, &["upper", "lower"]);
            assert!(error.to_string().contains("calc.wasm"), "{error}");
            assert!(
                events[0]
                    .to_string()
                    .contains("old version keeps serving [upper, lower]"),
                "{}",
                events[0]
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(registry.names(), ["greet", "upper", "lower"]);
    assert_eq!(
        call(&registry, "upper", r#"{"text":"ab"}"#).await.unwrap(),
        json!("AB")
    );
    // Not tried again until it changes again.
    assert!(watcher.poll().is_empty() && watcher.poll().is_empty());

    // A manifest added next to a plugin is a change of that plugin too.
    std::fs::write(
        dir.path().join("greet.toml"),
        "[limits]\ntimeout_ms = 1000\n",
    )
    .unwrap();
    let events = tokio::task::block_in_place(|| settle(&mut watcher));
    assert!(
        matches!(&events[..], [WatchEvent::Reloaded { plugin, .. }] if plugin.limits.timeout() == Duration::from_secs(1)),
        "{events:?}"
    );

    // Removed.
    std::fs::remove_file(dir.path().join("calc.wasm")).unwrap();
    let events = tokio::task::block_in_place(|| settle(&mut watcher));
    assert!(
        matches!(&events[..], [WatchEvent::Unloaded { tools, .. }] if tools == &["upper", "lower"]),
        "{events:?}"
    );
    assert_eq!(registry.names(), ["greet"]);
    assert_eq!(
        call(&registry, "greet", r#"{"name":"Ada"}"#).await.unwrap(),
        json!("Hello, Ada!")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_in_flight_finishes_on_the_version_it_started_on() {
    let dir = tempfile::tempdir().unwrap();
    copy("hostile_loop", dir.path(), "slow");
    let host = host();
    let registry = Arc::new(Registry::new());
    let report = host.load_dir(dir.path(), &registry);
    let mut watcher = PluginWatcher::new(
        Arc::clone(&host),
        dir.path(),
        Arc::clone(&registry),
        &report,
    );
    let running = tokio::spawn({
        let registry = Arc::clone(&registry);
        async move { call(&registry, "hostile_loop", "{}").await }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    copy("greet", dir.path(), "slow");
    let events = tokio::task::block_in_place(|| settle(&mut watcher));
    assert!(
        matches!(&events[..], [WatchEvent::Reloaded { .. }]),
        "{events:?}"
    );
    assert_eq!(
        call(&registry, "greet", r#"{"name":"Ada"}"#).await.unwrap(),
        json!("Hello, Ada!")
    );
    // The old version's call ends as that version's calls do: stopped at its time limit.
    let outcome = running.await.unwrap();
    assert!(
        matches!(outcome, Err(ToolError::TimedOut { ref tool, .. }) if tool == "hostile_loop"),
        "{outcome:?}"
    );
}

/// Hostile: with a plugins.lock, `--watch` is no way around it. A swapped component is
/// refused while the pinned version keeps serving, an unlisted new one is not loaded, a
/// version pinned again (`host lock`) loads, and removing the lock loads nothing new.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hot_reload_loads_only_what_the_lock_pins() {
    use toolhost_plugin::lock::PluginLock;
    use toolhost_plugin::PluginErrorKind;

    let dir = tempfile::tempdir().unwrap();
    copy("greet", dir.path(), "greet");
    let (lock, _) = PluginLock::scan(dir.path(), None).unwrap();
    lock.write(dir.path()).unwrap();
    let host = host();
    let registry = Arc::new(Registry::new());
    let lock = PluginLock::read(dir.path()).unwrap();
    let report = host.load_dir_pinned(dir.path(), &registry, lock.as_ref());
    assert_eq!(registry.names(), ["greet"]);
    let mut watcher = PluginWatcher::new(
        Arc::clone(&host),
        dir.path(),
        Arc::clone(&registry),
        &report,
    );

    // Swapped: greet.wasm now holds another component; the pinned one keeps serving.
    copy("multi", dir.path(), "greet");
    let events = tokio::task::block_in_place(|| settle(&mut watcher));
    match &events[..] {
        [WatchEvent::Failed { serving, error, .. }] => {
            assert_eq!(serving, &["greet"]);
            assert!(
                matches!(error.kind(), PluginErrorKind::Unpinned { .. }),
                "{error:?}"
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(registry.names(), ["greet"]);

    // Added but not in the lock: not loaded.
    copy("divide", dir.path(), "calc");
    let events = tokio::task::block_in_place(|| settle(&mut watcher));
    assert!(
        matches!(&events[..], [WatchEvent::Failed { serving, error, .. }]
            if serving.is_empty() && matches!(error.kind(), PluginErrorKind::Unpinned { .. })),
        "{events:?}"
    );
    assert_eq!(registry.names(), ["greet"]);

    // Pinned again by the operator, then changed again (touched): now it loads.
    let (lock, _) = PluginLock::scan(dir.path(), None).unwrap();
    lock.write(dir.path()).unwrap();
    copy("divide", dir.path(), "calc");
    let events = tokio::task::block_in_place(|| settle(&mut watcher));
    assert!(
        matches!(&events[..], [WatchEvent::Loaded(plugin)] if plugin.tools == ["divide"]),
        "{events:?}"
    );

    // The lock removed while serving: nothing new loads, the reason names the lock.
    std::fs::remove_file(PluginLock::path_in(dir.path())).unwrap();
    copy("greet", dir.path(), "calc");
    let events = tokio::task::block_in_place(|| settle(&mut watcher));
    match &events[..] {
        [WatchEvent::Failed { serving, error, .. }] => {
            assert_eq!(serving, &["divide"]);
            assert!(
                matches!(error.kind(), PluginErrorKind::Lock(_)),
                "{error:?}"
            );
            assert!(error.to_string().contains("plugins.lock"), "{error}");
        }
        other => panic!("{other:?}"),
    }
    assert!(registry.names().contains(&"divide".to_owned()));
}

/// Hostile: a lock policy (the CLI's `--require-signer`) holds for hot loads too. A
/// component the lock pins but the policy refuses is not loaded when it appears, and the
/// refusal carries the policy's reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hot_reload_applies_the_lock_policy() {
    use toolhost_plugin::lock::{LockPolicy, PluginLock};
    use toolhost_plugin::PluginErrorKind;

    let dir = tempfile::tempdir().unwrap();
    copy("greet", dir.path(), "greet");
    let (lock, _) = PluginLock::scan(dir.path(), None).unwrap();
    lock.write(dir.path()).unwrap();
    let host = host();
    let registry = Arc::new(Registry::new());
    let lock = PluginLock::read(dir.path()).unwrap();
    let report = host.load_dir_pinned(dir.path(), &registry, lock.as_ref());
    assert_eq!(registry.names(), ["greet"]);
    let policy: LockPolicy = Arc::new(|lock: &mut PluginLock| {
        lock.refuse(
            "calc.wasm",
            "--require-signer: its lock entry names no signer".into(),
        );
    });
    let mut watcher = PluginWatcher::new(
        Arc::clone(&host),
        dir.path(),
        Arc::clone(&registry),
        &report,
    )
    .with_lock_policy(policy);

    // Added and pinned by `host lock`, but refused by the policy.
    copy("divide", dir.path(), "calc");
    let (lock, _) = PluginLock::scan(dir.path(), None).unwrap();
    lock.write(dir.path()).unwrap();
    let events = tokio::task::block_in_place(|| settle(&mut watcher));
    match &events[..] {
        [WatchEvent::Failed { serving, error, .. }] => {
            assert!(serving.is_empty());
            assert!(
                matches!(error.kind(), PluginErrorKind::Unpinned { .. }),
                "{error:?}"
            );
            assert!(
                error
                    .to_string()
                    .contains("--require-signer: its lock entry names no signer"),
                "{error}"
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(registry.names(), ["greet"]);
}

/// A 0.3.0 plugin's prompts and resources follow it: registered under its name when it
/// comes, replaced when it changes (a version without them leaves none), removed when it
/// goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugins_prompts_and_resources_come_change_and_go_with_it() {
    let dir = tempfile::tempdir().unwrap();
    copy("greet", dir.path(), "greet");
    let host = host();
    let registry = Arc::new(Registry::new());
    let report = host.load_dir(dir.path(), &registry);
    let mut watcher = PluginWatcher::new(
        Arc::clone(&host),
        dir.path(),
        Arc::clone(&registry),
        &report,
    );
    let prompts = |registry: &Registry| -> Vec<String> {
        registry
            .catalog()
            .prompts()
            .into_iter()
            .map(|p| p.name)
            .collect()
    };
    let namespaces = |registry: &Registry| -> Vec<String> {
        registry
            .catalog()
            .resource_sources()
            .into_iter()
            .map(|(namespace, _)| namespace)
            .collect()
    };

    // Added: `rich` offers a prompt and resources under plugin://rich/.
    copy("rich", dir.path(), "rich");
    assert!(matches!(&settle(&mut watcher)[..], [WatchEvent::Loaded(_)]));
    assert_eq!(prompts(&registry), ["rich_summary"]);
    assert_eq!(namespaces(&registry), ["plugin://rich/"]);

    // Changed into a plugin with neither: nothing of the old version's is left.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    copy("divide", dir.path(), "rich");
    assert!(matches!(
        &settle(&mut watcher)[..],
        [WatchEvent::Reloaded { .. }]
    ));
    assert!(prompts(&registry).is_empty());
    assert!(namespaces(&registry).is_empty());

    // Changed back, then removed.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    copy("rich", dir.path(), "rich");
    assert!(matches!(
        &settle(&mut watcher)[..],
        [WatchEvent::Reloaded { .. }]
    ));
    assert_eq!(prompts(&registry), ["rich_summary"]);
    std::fs::remove_file(dir.path().join("rich.wasm")).unwrap();
    assert!(matches!(
        &settle(&mut watcher)[..],
        [WatchEvent::Unloaded { .. }]
    ));
    assert!(prompts(&registry).is_empty());
    assert!(namespaces(&registry).is_empty());
}
