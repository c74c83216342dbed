//! The host's imports against the `hostile_imports` plugin (built by `toolhost-tests`):
//! the log rate limit seen in the host log.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use tracing::field::{Field, Visit};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

use crate::registry::{CallContext, Environment, Registry, ToolCall};

use super::*;

/// The messages of every `plugin` event, in order.
#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<String>>>);

struct Message(String);

impl Visit for Message {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.0 = format!("{value:?}");
        }
    }
}

impl<S: tracing::Subscriber> Layer<S> for Capture {
    fn on_event(&self, event: &tracing::Event<'_>, _ctx: Context<'_, S>) {
        if event.metadata().target() == "plugin" {
            let mut message = Message(String::new());
            event.record(&mut message);
            self.0.lock().unwrap().push(message.0);
        }
    }
}

impl Capture {
    fn messages(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

/// Three calls of 2000 log lines each: the host log gets the burst (1000) plus what the
/// rate (100 lines/s) allows over the elapsed time, whatever the number of calls, and
/// the dropped lines are all counted in "dropped N log lines" summaries.
#[tokio::test(flavor = "current_thread")]
async fn a_log_flood_is_rate_limited_across_calls_and_counted() {
    let capture = Capture::default();
    let subscriber = tracing_subscriber::registry().with(capture.clone());
    let _guard = tracing::subscriber::set_default(subscriber);
    let dir = tempfile::tempdir().unwrap();
    toolhost_tests::install_without_manifests(dir.path(), &["hostile_imports"]).unwrap();
    let host = PluginHost::new(config()).unwrap();
    let registry = Registry::new();
    host.load_file(&dir.path().join("hostile_imports.wasm"), &registry)
        .unwrap();

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
