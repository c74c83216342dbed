//! The `interaction` import against a hostile plugin (`hostile_ask`, whose manifest says
//! `[grants] ask = true`): the grant needs the operator's flag too, a call asks at most
//! 16 questions, a huge schema never reaches the client, and a call with nobody to ask
//! is `unsupported`, never a yes.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use serde_json::{json, Value};
use toolhost::registry::{Interaction, InteractionFuture};

use super::*;

/// An interaction that says yes to everything and counts the questions that reached it.
#[derive(Default)]
struct YesMan {
    asked: AtomicU32,
}

impl Interaction for YesMan {
    fn confirm(&self, _message: String) -> InteractionFuture<bool> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        Box::pin(async { Ok(true) })
    }

    fn ask(&self, _message: String, _schema: Value) -> InteractionFuture<Option<Value>> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        Box::pin(async { Ok(Some(json!({"ok": true}))) })
    }
}

/// A registry with `hostile_ask` loaded, its manifest included or not, the operator's
/// flag as given.
fn ask_registry(with_manifest: bool, operator_allows: bool) -> (tempfile::TempDir, Registry) {
    let dir = tempfile::tempdir().unwrap();
    if with_manifest {
        toolhost_tests::install(dir.path(), &["hostile_ask"]).unwrap();
    } else {
        toolhost_tests::install_without_manifests(dir.path(), &["hostile_ask"]).unwrap();
    }
    let mut builder = config().to_builder();
    builder.plugin_ask(operator_allows);
    let registry = load_one(dir.path(), "hostile_ask", builder.build());
    (dir, registry)
}

/// Calls `tool` with `arguments`, with `interaction` set (or none).
async fn ask_call(
    registry: &Registry,
    interaction: Option<Arc<YesMan>>,
    tool: &str,
    arguments: Value,
) -> Value {
    answer_with(registry, interaction, tool, arguments).await
}

#[tokio::test]
async fn a_thousand_confirms_in_one_call_are_capped_at_16_and_the_call_answers() {
    let (_dir, registry) = ask_registry(true, true);
    let yes = Arc::new(YesMan::default());
    let result = ask_call(
        &registry,
        Some(Arc::clone(&yes)),
        "ask_confirm_many",
        json!({"count": 1000}),
    )
    .await;
    assert_eq!(result["yes"], 16);
    assert_eq!(result["no"], 0);
    assert_eq!(result["errors"], json!({"invalid": 984}));
    assert_eq!(
        result["first_error"],
        "this call already asked 16 questions, the most one call may ask; ask fewer, or combine them into one form"
    );
    assert_eq!(yes.asked.load(Ordering::SeqCst), 16);
    // The next call has its own 16.
    let again = ask_call(
        &registry,
        Some(Arc::clone(&yes)),
        "ask_confirm_many",
        json!({"count": 3}),
    )
    .await;
    assert_eq!(again["yes"], 3);
    assert_eq!(yes.asked.load(Ordering::SeqCst), 19);
}

#[tokio::test]
async fn a_50_mb_schema_is_refused_before_the_client_and_the_host_stays_up() {
    let (_dir, registry) = ask_registry(true, true);
    let yes = Arc::new(YesMan::default());
    let result = ask_call(
        &registry,
        Some(Arc::clone(&yes)),
        "ask_huge_schema",
        json!({"bytes": 50_000_000}),
    )
    .await;
    assert_eq!(result["error"], "invalid");
    assert_eq!(
        result["message"],
        "the schema is 50000000 bytes, over the limit of 65536; ask for fewer values"
    );
    assert_eq!(yes.asked.load(Ordering::SeqCst), 0);
    // A schema within the limit reaches the client; the plugin still answers.
    let small = ask_call(
        &registry,
        Some(Arc::clone(&yes)),
        "ask_huge_schema",
        json!({"bytes": 1000}),
    )
    .await;
    assert_eq!(small["answer"], r#"{"ok":true}"#);
    assert_eq!(yes.asked.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn asking_needs_both_the_manifest_grant_and_the_operator_flag() {
    for (with_manifest, operator_allows) in [(true, false), (false, true), (false, false)] {
        let (_dir, registry) = ask_registry(with_manifest, operator_allows);
        let yes = Arc::new(YesMan::default());
        let result = ask_call(
            &registry,
            Some(Arc::clone(&yes)),
            "ask_confirm_once",
            json!({}),
        )
        .await;
        assert_eq!(
            result["error"], "not-allowed",
            "manifest {with_manifest}, flag {operator_allows}"
        );
        assert_eq!(
            result["message"],
            "plugin hostile_ask may not ask the user: its manifest must say `[grants] ask = true` and the operator must allow it (--plugin-ask); go on without asking, or fail and say what you need"
        );
        assert_eq!(yes.asked.load(Ordering::SeqCst), 0);
    }
    let (_dir, registry) = ask_registry(true, true);
    let yes = Arc::new(YesMan::default());
    let result = ask_call(
        &registry,
        Some(Arc::clone(&yes)),
        "ask_confirm_once",
        json!({}),
    )
    .await;
    assert_eq!(result, json!({"answer": true}));
}

#[tokio::test]
async fn a_call_with_nobody_to_ask_is_unsupported_never_a_yes() {
    let (_dir, registry) = ask_registry(true, true);
    let result = ask_call(&registry, None, "ask_confirm_once", json!({})).await;
    assert_eq!(result["error"], "unsupported");
    assert!(
        result["message"]
            .as_str()
            .unwrap()
            .starts_with("nobody can be asked during this call"),
        "{result}"
    );
}

/// `inspect` says whether the manifest asks to ask (`ask`) and whether this host allows
/// it (`ask_allowed`), each on its own: a manifest without the grant asks nothing even
/// when the operator allows asking.
#[test]
fn inspect_reports_the_ask_grant_and_the_operators_flag_apart() {
    for (with_manifest, operator_allows) in [(true, true), (true, false), (false, true)] {
        let dir = tempfile::tempdir().unwrap();
        if with_manifest {
            toolhost_tests::install(dir.path(), &["hostile_ask"]).unwrap();
        } else {
            toolhost_tests::install_without_manifests(dir.path(), &["hostile_ask"]).unwrap();
        }
        let mut builder = config().to_builder();
        builder.plugin_ask(operator_allows);
        let info = PluginHost::new(builder.build())
            .unwrap()
            .inspect(&dir.path().join("hostile_ask.wasm"))
            .unwrap();
        assert_eq!(
            (info.ask, info.ask_allowed),
            (with_manifest, operator_allows),
            "manifest {with_manifest}, operator {operator_allows}"
        );
        // hostile_ask offers no prompts or resources.
        assert!(info.prompts.is_empty());
        assert!(!info.offers_resources);
        assert_eq!(info.resource_namespace, "plugin://hostile_ask/");
    }
}
