//! The `sampling` import against a hostile plugin (`hostile_ask`, whose manifest says
//! `[grants] sampling = { max_requests = 3, max_tokens = 500 }`): the grant needs the
//! operator's flag too, a call sends at most its `max_requests`, `max_tokens` above the
//! grant and a 50 MB message never reach the client, a call with nobody to ask is
//! `unsupported`; and a 0.3.0 component built before the import existed still loads.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use serde_json::{json, Value};
use toolhost::catalog::Role;
use toolhost::registry::{
    ContentBlock, Interaction, InteractionFuture, SamplingRequest, SamplingResponse,
};

use super::*;
use crate::manifest::SamplingGrant;

/// An interaction whose model answers every request and counts those that reached it.
#[derive(Default)]
struct Model {
    sampled: AtomicU32,
}

impl Interaction for Model {
    fn confirm(&self, _message: String) -> InteractionFuture<bool> {
        Box::pin(async { Ok(true) })
    }

    fn ask(&self, _message: String, _schema: Value) -> InteractionFuture<Option<Value>> {
        Box::pin(async { Ok(None) })
    }

    fn sample(&self, request: SamplingRequest) -> InteractionFuture<SamplingResponse> {
        self.sampled.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move {
            Ok(SamplingResponse {
                role: Role::Assistant,
                content: ContentBlock::text(format!("{} tokens at most", request.max_tokens)),
                model: "test-model".into(),
                stop_reason: Some("endTurn".into()),
            })
        })
    }
}

/// A registry with `hostile_ask` loaded, with `manifest` (its own when `None`), the
/// operator allowing sampling or not.
fn sampling_registry(
    manifest: Option<&str>,
    operator_allows: bool,
) -> (tempfile::TempDir, Registry) {
    let dir = tempfile::tempdir().unwrap();
    toolhost_tests::install(dir.path(), &["hostile_ask"]).unwrap();
    if let Some(manifest) = manifest {
        std::fs::write(dir.path().join("hostile_ask.toml"), manifest).unwrap();
    }
    let mut builder = config().to_builder();
    builder.plugin_sampling(operator_allows);
    let registry = load_one(dir.path(), "hostile_ask", builder.build());
    (dir, registry)
}

/// Calls `tool` with `arguments`, with `model` as the interaction (or none).
async fn sample_call(
    registry: &Registry,
    model: Option<Arc<Model>>,
    tool: &str,
    arguments: Value,
) -> Value {
    answer_with(registry, model, tool, arguments).await
}

#[tokio::test]
async fn a_thousand_requests_in_one_call_are_capped_at_the_grant_and_the_call_answers() {
    let (_dir, registry) = sampling_registry(None, true);
    let model = Arc::new(Model::default());
    let result = sample_call(
        &registry,
        Some(Arc::clone(&model)),
        "sample_many",
        json!({"count": 1000}),
    )
    .await;
    assert_eq!(result["answered"], 3);
    assert_eq!(result["errors"], json!({"invalid": 997}));
    assert_eq!(
        result["first_error"],
        "this call already sent 3 sampling requests, the most plugin hostile_ask's grant allows per call (`[grants] sampling` max_requests = 3); send fewer, or do the rest without the model"
    );
    assert_eq!(model.sampled.load(Ordering::SeqCst), 3);
    // The next call has its own 3.
    let again = sample_call(
        &registry,
        Some(Arc::clone(&model)),
        "sample_many",
        json!({"count": 2}),
    )
    .await;
    assert_eq!(again["answered"], 2);
    assert_eq!(model.sampled.load(Ordering::SeqCst), 5);
}

#[tokio::test]
async fn a_billion_tokens_is_refused_naming_what_the_grant_allows() {
    let (_dir, registry) = sampling_registry(None, true);
    let model = Arc::new(Model::default());
    for tokens in [1_000_000_000u64, 501, 0] {
        let result = sample_call(
            &registry,
            Some(Arc::clone(&model)),
            "sample_tokens",
            json!({"max_tokens": tokens}),
        )
        .await;
        assert_eq!(result["error"], "invalid", "{tokens}");
        assert_eq!(
            result["message"],
            format!("the request asks for {tokens} tokens; plugin hostile_ask's grant allows 1 to 500 per request (`[grants] sampling` max_tokens); ask for at most 500")
        );
    }
    assert_eq!(model.sampled.load(Ordering::SeqCst), 0);
    let within = sample_call(
        &registry,
        Some(Arc::clone(&model)),
        "sample_tokens",
        json!({"max_tokens": 500}),
    )
    .await;
    assert_eq!(within["text"], "500 tokens at most");
    assert_eq!(model.sampled.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_50_mb_message_is_refused_before_the_client_and_the_host_stays_up() {
    let (_dir, registry) = sampling_registry(None, true);
    let model = Arc::new(Model::default());
    let result = sample_call(
        &registry,
        Some(Arc::clone(&model)),
        "sample_huge",
        json!({"bytes": 50_000_000}),
    )
    .await;
    assert_eq!(result["error"], "invalid");
    assert_eq!(
        result["message"],
        "the request carries 50000000 bytes (messages, system prompt, stop sequences, model hints), over the limit of 65536; send less"
    );
    assert_eq!(model.sampled.load(Ordering::SeqCst), 0);
    let small = sample_call(
        &registry,
        Some(Arc::clone(&model)),
        "sample_huge",
        json!({"bytes": 1000}),
    )
    .await;
    assert_eq!(
        small,
        json!({"role": "assistant", "text": "10 tokens at most", "model": "test-model", "stop_reason": "endTurn"})
    );
    assert_eq!(model.sampled.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn sampling_needs_both_the_manifest_grant_and_the_operator_flag() {
    let ask_only = "[grants]\nask = true\n";
    for (manifest, operator_allows) in [
        (None, false),
        (Some(ask_only), true),
        (Some(ask_only), false),
    ] {
        let (_dir, registry) = sampling_registry(manifest, operator_allows);
        let model = Arc::new(Model::default());
        let result = sample_call(
            &registry,
            Some(Arc::clone(&model)),
            "sample_once",
            json!({}),
        )
        .await;
        assert_eq!(
            result["error"], "not-allowed",
            "manifest {manifest:?}, flag {operator_allows}"
        );
        assert_eq!(
            result["message"],
            "plugin hostile_ask may not ask the client's model: its manifest must say `[grants] sampling = true` (or `sampling = { max_requests = N, max_tokens = M }`) and the operator must allow it (--plugin-sampling); go on without it, or fail and say what you need"
        );
        assert_eq!(model.sampled.load(Ordering::SeqCst), 0);
    }
    // `sampling = true`: the defaults (4 per call).
    let (_dir, registry) = sampling_registry(Some("[grants]\nsampling = true\n"), true);
    let model = Arc::new(Model::default());
    let result = sample_call(
        &registry,
        Some(Arc::clone(&model)),
        "sample_many",
        json!({"count": 6}),
    )
    .await;
    assert_eq!(result["answered"], 4);
    assert_eq!(result["errors"], json!({"invalid": 2}));
}

#[tokio::test]
async fn a_call_with_nobody_to_sample_is_unsupported() {
    let (_dir, registry) = sampling_registry(None, true);
    let result = sample_call(&registry, None, "sample_once", json!({})).await;
    assert_eq!(result["error"], "unsupported");
    assert_eq!(
        result["message"],
        "the client's model cannot be asked during this call (the client did not declare sampling, or the call is not served to a client, e.g. it runs as a task); go on without it, or fail and say what you need"
    );
}

/// An interaction predating sampling (only `confirm` and `ask`): the trait's default
/// refuses, so nothing is sent.
struct OldInteraction;

impl Interaction for OldInteraction {
    fn confirm(&self, _message: String) -> InteractionFuture<bool> {
        Box::pin(async { Ok(true) })
    }

    fn ask(&self, _message: String, _schema: Value) -> InteractionFuture<Option<Value>> {
        Box::pin(async { Ok(None) })
    }
}

#[tokio::test]
async fn an_interaction_without_sampling_refuses_it_by_default() {
    let (_dir, registry) = sampling_registry(None, true);
    let old = Some(Arc::new(OldInteraction));
    let result = answer_with(&registry, old, "sample_once", json!({})).await;
    assert_eq!(result["error"], "unsupported");
    assert_eq!(
        result["message"],
        "the client's model cannot be asked during this call (sampling is not offered here)"
    );
}

#[test]
fn manifests_bound_the_grant_and_refuse_more_than_the_ceilings() {
    let parse = |text: &str| crate::manifest::parse(Path::new("p.toml"), text);
    let grant = |text: &str| parse(text).unwrap().grants.sampling;
    assert_eq!(grant("[grants]\n"), None);
    assert_eq!(grant("[grants]\nsampling = false\n"), None);
    assert_eq!(
        grant("[grants]\nsampling = true\n"),
        Some(SamplingGrant::default())
    );
    assert_eq!(
        grant("[grants]\nsampling = { max_tokens = 200 }\n"),
        Some(SamplingGrant {
            max_requests: 4,
            max_tokens: 200
        })
    );
    for (text, message) in [
        (
            "[grants]\nsampling = { max_requests = 1000 }\n",
            "sampling.max_requests is 1000; it must be 1 to 16 (requests per call)",
        ),
        (
            "[grants]\nsampling = { max_tokens = 1000000000 }\n",
            "sampling.max_tokens is 1000000000; it must be 1 to 32768 (tokens per request)",
        ),
        (
            "[grants]\nsampling = { max_tokens = 99999999999 }\n",
            "sampling.max_tokens is 4294967295; it must be 1 to 32768 (tokens per request)",
        ),
        (
            "[grants]\nsampling = { max_requests = 0 }\n",
            "sampling.max_requests is 0; it must be 1 to 16 (requests per call)",
        ),
        (
            "[grants]\nsampling = { budget = 5 }\n",
            "grants.sampling must be true, false, or a table { max_requests = N, max_tokens = M }",
        ),
        (
            "[grants]\nsampling = \"yes\"\n",
            "grants.sampling must be true, false, or a table { max_requests = N, max_tokens = M }",
        ),
    ] {
        let err = parse(text).unwrap_err().to_string();
        assert!(err.contains(message), "{text}: {err}");
    }
}

/// `inspect` says what the manifest asks to sample and whether this host allows it.
#[test]
fn inspect_reports_the_sampling_grant_and_the_operators_flag_apart() {
    for operator_allows in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        toolhost_tests::install(dir.path(), &["hostile_ask"]).unwrap();
        let mut builder = config().to_builder();
        builder.plugin_sampling(operator_allows);
        let info = PluginHost::new(builder.build())
            .unwrap()
            .inspect(&dir.path().join("hostile_ask.wasm"))
            .unwrap();
        assert_eq!(
            (info.sampling, info.sampling_allowed),
            (
                Some(SamplingGrant {
                    max_requests: 3,
                    max_tokens: 500
                }),
                operator_allows
            )
        );
        assert!(info
            .imports
            .iter()
            .any(|import| import == "toolhost:plugin/sampling@0.3.0"));
    }
}

/// `hostile_ask` as built before the `sampling` import was added to 0.3.0 (frozen in
/// `fixtures/`): it imports `interaction` from the same package, and loads, asks and
/// answers as before under the host that now also offers `sampling`.
#[tokio::test]
async fn a_0_3_0_component_built_before_sampling_still_loads_and_asks() {
    let dir = tempfile::tempdir().unwrap();
    let wasm = dir.path().join("hostile_ask.wasm");
    std::fs::write(&wasm, include_bytes!("fixtures/hostile_ask-0.3.0.wasm")).unwrap();
    std::fs::write(
        dir.path().join("hostile_ask.toml"),
        "[grants]\nask = true\n",
    )
    .unwrap();
    let mut builder = config().to_builder();
    builder.plugin_ask(true).plugin_sampling(true);
    let host = PluginHost::new(builder.build()).unwrap();
    let info = host.inspect(&wasm).unwrap();
    assert!(info
        .imports
        .iter()
        .any(|import| import == "toolhost:plugin/interaction@0.3.0"));
    assert!(!info
        .imports
        .iter()
        .any(|import| import.contains("sampling")));
    let registry = Registry::new();
    host.load_file(&wasm, &registry).unwrap();
    let names: Vec<String> = registry.definitions().into_iter().map(|d| d.name).collect();
    assert_eq!(
        names,
        ["ask_confirm_many", "ask_huge_schema", "ask_confirm_once"]
    );
    let model = Arc::new(Model::default());
    let result = sample_call(&registry, Some(model), "ask_confirm_once", json!({})).await;
    assert_eq!(result, json!({"answer": true}));
}
