//! The host's imports: the log rate limit seen in the host log (the `hostile_imports`
//! plugin, built by `toolhost-tests`), and grants the path policy refuses at load (the
//! fixture).

use std::sync::Arc;
use std::time::Instant;

use tracing_subscriber::layer::SubscriberExt;

use toolhost::registry::{CallContext, Environment, Registry, ToolCall};

use super::capture::Capture;
use super::*;

/// Three calls of 2000 log lines each: the host log gets the burst (1000) plus what the
/// rate (100 lines/s) allows over the elapsed time, whatever the number of calls, and
/// the dropped lines are all counted in "dropped N log lines" summaries.
#[tokio::test(flavor = "current_thread")]
async fn a_log_flood_is_rate_limited_across_calls_and_counted() {
    let capture = Capture::of_target("plugin");
    let subscriber = tracing_subscriber::registry().with(capture.clone());
    let _guard = tracing::subscriber::set_default(subscriber);
    let dir = tempfile::tempdir().unwrap();
    toolhost_tests::install_without_manifests(dir.path(), &["hostile_imports"]).unwrap();
    let registry = load_one(dir.path(), "hostile_imports", config());

    let started = Instant::now();
    for _ in 0..3 {
        let result = registry
            .dispatch(
                &CallContext::new(),
                &ToolCall::new("imports_log", r#"{"count": 2000}"#),
                &Environment::generate(),
            )
            .await
            .unwrap();
        assert_eq!(
            result.content,
            serde_json::json!({"done": 2000, "error": null})
        );
    }
    let elapsed = started.elapsed().as_secs_f64();

    let messages = capture.messages();
    let lines: Vec<&String> = messages
        .iter()
        .filter(|m| m.starts_with("flood line "))
        .collect();
    let dropped: u64 = messages
        .iter()
        .filter_map(|m| m.strip_prefix("dropped "))
        .map(|rest| {
            assert!(
                rest.ends_with(" log lines of plugin \"hostile_imports\": over its log rate limit of 100 lines/s (burst 1000)"),
                "{rest}"
            );
            rest.split(' ').next().unwrap().parse::<u64>().unwrap()
        })
        .sum();
    let allowed = 1000.0 + elapsed * 100.0 + 1.0;
    assert!(
        lines.len() >= 1000 && lines.len() as f64 <= allowed,
        "{} lines logged in {elapsed:.2}s, at most {allowed:.0} allowed",
        lines.len()
    );
    assert_eq!(lines[999], "flood line 999");
    assert_eq!(
        lines.len() as u64 + dropped,
        6000,
        "every line logged or counted"
    );
}

/// A manifest root on a hidden path is not loaded by a host that hides hidden paths
/// (a hidden root is refused at load), and a read-write grant is not loaded by a read-only host; the same
/// manifests load on a host without those options.
#[test]
fn a_grant_the_path_policy_refuses_is_not_loaded() {
    let storage: Arc<dyn toolhost::vfs::Storage> = Arc::new(toolhost::vfs::MemoryStorage::new());
    let host = |policy: toolhost::vfs::FilePolicy| {
        PluginHost::new(PluginHostConfig {
            storage: Some(Arc::clone(&storage)),
            max_file_access: FileAccess::ReadWrite,
            file_policy: policy,
            ..config()
        })
        .unwrap()
    };
    let hiding = toolhost::vfs::FilePolicy::default().with_hide_hidden_paths(true);
    let read_only = toolhost::vfs::FilePolicy::default().with_read_only(true);
    for (manifest, policy, reason) in [
        (
            "[grants]\nfiles = \"read\"\nroot = \".git\"\n",
            hiding,
            "grants.root is \".git\", a hidden path (a segment starts with _ or .), and this host hides hidden paths from every tool (--hide-hidden); give a sub-directory without hidden segments, or start the host without --hide-hidden",
        ),
        (
            "[grants]\nfiles = \"read-write\"\n",
            read_only,
            "grants.files is \"read-write\", but this host is read-only (--read-only): no tool may write files; ask for \"read\", or start the host without --read-only",
        ),
    ] {
        let (dir, wasm) = plugin_dir(Some(manifest));
        let registry = Registry::new();
        let err = host(policy).load_file(&wasm, &registry).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "{}: invalid plugin manifest: {reason}",
                dir.path().join("fx.toml").display()
            )
        );
        assert!(registry.is_empty());
        let loaded = host(toolhost::vfs::FilePolicy::default()).load_file(&wasm, &Registry::new());
        assert!(loaded.is_ok(), "{loaded:?}");
    }
}
