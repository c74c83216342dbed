//! Hostile plugins: each yields its expected error kind within its limit, and the very
//! next call to greet still succeeds.

use std::time::{Duration, Instant};

use serde_json::Value;
use toolhost::registry::{Limit, ToolError};

use crate::common::{setup_with, short_limits, Options, Setup};

const TIMEOUT: Duration = Duration::from_millis(500);

fn hostile(names: &[&str]) -> Setup {
    let mut all = vec!["greet"];
    all.extend_from_slice(names);
    let setup = setup_with(
        &all,
        Options {
            limits: short_limits(TIMEOUT),
            ..Options::default()
        },
    );
    assert!(setup.report.failed.is_empty(), "{:?}", setup.report.failed);
    setup
}

#[tokio::test]
async fn runaway_loop_is_stopped_within_twice_its_timeout() {
    let setup = hostile(&["hostile_loop"]);
    let started = Instant::now();
    let result = setup.call("hostile_loop", "{}").await;
    let elapsed = started.elapsed();
    match result {
        Err(ToolError::TimedOut { tool, limit }) => {
            assert_eq!(tool, "hostile_loop");
            assert_eq!(limit, TIMEOUT);
        }
        other => panic!("expected TimedOut, got {other:?}"),
    }
    assert!(elapsed >= TIMEOUT, "stopped early: {elapsed:?}");
    assert!(elapsed < TIMEOUT * 2, "stopped late: {elapsed:?}");
    setup.assert_greet_works().await;
}

#[tokio::test]
async fn allocation_past_the_cap_names_the_memory_limit() {
    let setup = hostile(&["hostile_alloc"]);
    match setup.call("hostile_alloc", "{}").await {
        Err(ToolError::LimitExceeded { tool, limit, .. }) => {
            assert_eq!(tool, "hostile_alloc");
            assert_eq!(limit, Limit::Memory { bytes: 64 << 20 });
        }
        other => panic!("expected LimitExceeded, got {other:?}"),
    }
    setup.assert_greet_works().await;
}

#[tokio::test]
async fn stack_overflow_is_a_crash() {
    let setup = hostile(&["hostile_stack"]);
    match setup.call("hostile_stack", "{}").await {
        Err(ToolError::ToolPanicked { tool, message }) => {
            assert_eq!(tool, "hostile_stack");
            assert!(message.contains("call stack exhausted"), "{message}");
        }
        other => panic!("expected ToolPanicked, got {other:?}"),
    }
    setup.assert_greet_works().await;
}

#[tokio::test]
async fn panic_message_reaches_the_error() {
    let setup = hostile(&["hostile_panic"]);
    match setup
        .call("hostile_panic", r#"{"detail":"left the stove on"}"#)
        .await
    {
        Err(ToolError::ToolPanicked { tool, message }) => {
            assert_eq!(tool, "hostile_panic");
            assert!(
                message.contains("hostile panic: left the stove on"),
                "{message}"
            );
        }
        other => panic!("expected ToolPanicked, got {other:?}"),
    }
    setup.assert_greet_works().await;
}

#[tokio::test]
async fn huge_output_is_refused_at_the_output_limit() {
    let setup = hostile(&["hostile_output"]);
    match setup.call("hostile_output", "{}").await {
        Err(ToolError::LimitExceeded { tool, limit, .. }) => {
            assert_eq!(tool, "hostile_output");
            assert!(matches!(limit, Limit::Output { .. }), "{limit}");
        }
        other => panic!("expected LimitExceeded, got {other:?}"),
    }
    setup.assert_greet_works().await;
}

#[tokio::test]
async fn invalid_result_json_is_a_tool_failure() {
    let setup = hostile(&["hostile_badjson"]);
    match setup.call("hostile_badjson", "{}").await {
        Err(ToolError::Failed { tool, message }) => {
            assert_eq!(tool, "hostile_badjson");
            assert!(message.contains("invalid JSON"), "{message}");
        }
        other => panic!("expected Failed, got {other:?}"),
    }
    setup.assert_greet_works().await;
}

#[tokio::test]
async fn a_plugin_failure_carries_its_own_message() {
    let setup = hostile(&["hostile_stderr"]);
    match setup.call("hostile_stderr", r#"{"lines":2}"#).await {
        Err(ToolError::Failed { tool, message }) => {
            assert_eq!(tool, "hostile_stderr");
            assert!(
                message.contains("hostile_stderr failed after writing 2 lines to stderr"),
                "{message}"
            );
        }
        other => panic!("expected Failed, got {other:?}"),
    }
    setup.assert_greet_works().await;
}

#[tokio::test]
async fn wasi_gives_no_host_file_env_or_socket() {
    let setup = hostile(&["hostile_wasi_escape"]);
    let report = setup
        .call("hostile_wasi_escape", r#"{"connect":"127.0.0.1:1"}"#)
        .await
        .expect("the plugin reports its attempts");
    let attempts = report.as_object().expect("an object of attempts");
    for key in [
        "read_file",
        "read_dir_root",
        "write_file",
        "env_vars",
        "tcp_connect",
    ] {
        assert!(attempts.contains_key(key), "no {key} in {report}");
    }
    for (attempt, outcome) in attempts {
        assert_eq!(
            outcome["escaped"],
            Value::Bool(false),
            "{attempt} escaped: {outcome}"
        );
    }
    setup.assert_greet_works().await;
}

#[tokio::test]
async fn vfs_paths_outside_the_grant_are_refused() {
    let setup = hostile(&["hostile_vfs_escape"]);
    // Its manifest grants read access to `granted/` only.
    setup
        .storage
        .write("granted/ok.txt", b"fine", "text/plain")
        .expect("seed");
    setup
        .storage
        .write("secret/x.txt", b"sibling secret", "text/plain")
        .expect("seed");
    let outside = tempfile::NamedTempFile::new().expect("outside file");
    std::fs::write(outside.path(), "secret").expect("seed outside");
    let report = setup
        .call(
            "hostile_vfs_escape",
            r#"{"paths":["ok.txt","../secret/x.txt","secret/x.txt","/etc/passwd","a/../../x"]}"#,
        )
        .await
        .expect("the plugin reports its attempts");
    let results: Vec<(&str, &str)> = report["reads"]
        .as_array()
        .expect("reads")
        .iter()
        .map(|read| {
            (
                read["path"].as_str().unwrap_or(""),
                read["result"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        results,
        [
            ("ok.txt", "ok"),
            ("../secret/x.txt", "invalid-path"),
            // Inside the grant this names granted/secret/x.txt, which does not exist.
            ("secret/x.txt", "not-found"),
            ("/etc/passwd", "invalid-path"),
            ("a/../../x", "invalid-path"),
        ],
        "{report}"
    );
    assert_eq!(report["reads"][0]["detail"], Value::from("fine"));
    // Read-only: writing and deleting are denied, or refused for the path first.
    assert_ne!(report["write"]["result"], Value::from("ok"), "{report}");
    assert_ne!(report["delete"]["result"], Value::from("ok"), "{report}");
    assert_eq!(report["list"]["detail"], Value::from("ok.txt"), "{report}");
    assert_eq!(
        std::fs::read_to_string(outside.path()).expect("outside"),
        "secret"
    );
    assert_eq!(
        setup.storage.read("secret/x.txt").expect("sibling").content,
        b"sibling secret"
    );
    assert_eq!(setup.storage.list().expect("list").len(), 2);
    setup.assert_greet_works().await;
}

#[tokio::test]
async fn host_handles_created_in_a_loop_stop_at_the_handle_cap() {
    // The plugin's own 10 s timeout: the cap must stop it long before.
    let setup = setup_with(&["greet", "hostile_handles"], Options::default());
    assert!(setup.report.failed.is_empty(), "{:?}", setup.report.failed);
    let started = Instant::now();
    match setup.call("hostile_handles", "{}").await {
        Err(ToolError::LimitExceeded {
            tool,
            limit,
            message,
        }) => {
            assert_eq!(tool, "hostile_handles");
            assert_eq!(limit, Limit::Handles { count: 1024 });
            assert!(
                message.starts_with("the plugin held more than 1024 host handles (pollables, streams) at once and was stopped"),
                "{message}"
            );
        }
        other => panic!("expected LimitExceeded, got {other:?}"),
    }
    let elapsed = started.elapsed();
    assert!(
        elapsed < Duration::from_secs(5),
        "stopped late: {elapsed:?}"
    );
    setup.assert_greet_works().await;
}

#[tokio::test]
async fn a_composing_plugin_gets_the_built_in_tools_path_checks_as_a_direct_call_does() {
    use toolhost_plugin::manifest::ToolNames;
    let setup = setup_with(
        &["greet", "hostile_compose"],
        Options {
            plugin_tools: Some(ToolNames::All),
            ..Options::default()
        },
    );
    assert!(setup.report.failed.is_empty(), "{:?}", setup.report.failed);
    for path in ["../outside.txt", "/etc/passwd", "a/../../b"] {
        let arguments = serde_json::json!({"path": path}).to_string();
        let direct = setup.call("read_file", &arguments).await.unwrap_err();
        let nested = setup
            .call(
                "call_once",
                &serde_json::json!({"tool": "read_file", "arguments": arguments}).to_string(),
            )
            .await
            .expect("call_once");
        assert_eq!(nested["message"], direct.to_string(), "{path}");
        let kind = if matches!(direct, ToolError::InvalidArguments { .. }) {
            "invalid-arguments"
        } else {
            "failed"
        };
        assert_eq!(nested["error"], kind, "{path}");
    }
    // write_file outside the root: refused alike.
    let arguments = serde_json::json!({"path": "../x.txt", "content": "hi"}).to_string();
    let direct = setup.call("write_file", &arguments).await.unwrap_err();
    let nested = setup
        .call(
            "call_once",
            &serde_json::json!({"tool": "write_file", "arguments": arguments}).to_string(),
        )
        .await
        .expect("call_once");
    assert_eq!(nested["message"], direct.to_string());
}
