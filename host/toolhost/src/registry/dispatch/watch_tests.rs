//! What dispatch records for its observer: the arguments' check as a step of the call's
//! record, and no record at all for a call the observer does not ask one for.

use std::sync::{Arc, Mutex};

use serde_json::Value;
use toolhost_sdk::schema::{object, string};

use crate::registry::{
    Arguments, CallContext, CallEnd, CallObserver, CallStart, CallWatch, Environment,
    ObserverRefusal, Registry, Step, StepKind, ToolCall, ToolDefinition, ToolResult,
};

/// What a [`Watcher`] kept of a call's end: its outcome class, its record's steps
/// (`None`: no record) and its watch.
type Ended = (&'static str, Option<Vec<Step>>, CallWatch);

/// Asks for `watch` at each call's start; keeps each call's [`Ended`].
struct Watcher {
    watch: CallWatch,
    ends: Mutex<Vec<Ended>>,
}

impl CallObserver for Watcher {
    fn admit(&self, _call: &CallStart<'_>) -> Result<(), ObserverRefusal> {
        Ok(())
    }
    fn finished(&self, end: &CallEnd<'_>) {
        let steps = end.record.map(|record| record.touched().steps.clone());
        self.ends
            .lock()
            .unwrap()
            .push((end.outcome_class(), steps, end.watch));
    }
    fn watch(&self, _call: &CallStart<'_>) -> CallWatch {
        self.watch
    }
}

/// A registry with `need` (requires `path`; answers whether its context carried a
/// record) watched by a [`Watcher`] asking for `watch`.
fn watched(watch: CallWatch) -> (Registry, Arc<Watcher>) {
    let registry = Registry::new();
    registry
        .register(
            ToolDefinition::new(
                "need",
                "Needs a path.",
                object([("path", string("p"))], ["path"]),
            ),
            |ctx: CallContext, _args: Arguments, _env: Environment| async move {
                Ok(ToolResult::new(Value::Bool(ctx.record().is_some())))
            },
        )
        .unwrap();
    let watcher = Arc::new(Watcher {
        watch,
        ends: Mutex::new(Vec::new()),
    });
    registry
        .set_observer(Arc::clone(&watcher) as Arc<dyn CallObserver>)
        .unwrap();
    (registry, watcher)
}

async fn call(registry: &Registry, name: &str, arguments: &str) -> Option<Value> {
    let call = ToolCall::new(name, arguments);
    let env = Environment::default();
    registry
        .dispatch(&CallContext::new(), &call, &env)
        .await
        .ok()
        .map(|result| result.content)
}

/// Each step's kind and whether it failed.
fn kinds(steps: &[Step]) -> Vec<(StepKind, bool)> {
    steps.iter().map(|s| (s.kind.clone(), s.failed)).collect()
}

#[tokio::test]
async fn the_arguments_check_is_the_first_step_passed_or_refused() {
    let trace_id = Some([7; 16]);
    let (registry, watcher) = watched(CallWatch {
        record: true,
        trace_id,
    });
    assert_eq!(
        call(&registry, "need", r#"{"path": "a"}"#).await,
        Some(Value::Bool(true))
    );
    assert_eq!(call(&registry, "need", "{}").await, None);
    assert_eq!(call(&registry, "need", r#"{"path": null}"#).await, None);
    assert_eq!(call(&registry, "need", "null").await, None);
    assert_eq!(call(&registry, "need", "[1").await, None);
    // An unknown tool has no schema to check against: no step.
    assert_eq!(call(&registry, "nope", "{}").await, None);
    let ends = watcher.ends.lock().unwrap();
    let passed = vec![(StepKind::ArgumentCheck, false)];
    let refused = vec![(StepKind::ArgumentCheck, true)];
    let seen: Vec<_> = ends
        .iter()
        .map(|(class, steps, _)| (*class, kinds(steps.as_deref().unwrap())))
        .collect();
    assert_eq!(
        seen,
        [
            ("ok", passed),
            ("refused", refused.clone()),
            ("refused", refused.clone()),
            ("refused", refused.clone()),
            ("refused", refused),
            ("refused", vec![]),
        ]
    );
    let check = &ends[0].1.as_deref().unwrap()[0];
    assert!(check.start <= check.end);
    // What the observer decided at the start comes back at the end.
    assert!(ends.iter().all(|(_, _, watch)| watch.trace_id == trace_id));
}

#[tokio::test]
async fn a_call_the_observer_asks_no_record_of_records_nothing() {
    let (registry, watcher) = watched(CallWatch::default());
    // The handler sees no record in its context: it records nothing.
    assert_eq!(
        call(&registry, "need", r#"{"path": "a"}"#).await,
        Some(Value::Bool(false))
    );
    assert_eq!(call(&registry, "need", "{}").await, None);
    let ends = watcher.ends.lock().unwrap();
    assert_eq!(
        *ends,
        [
            ("ok", None, CallWatch::default()),
            ("refused", None, CallWatch::default()),
        ]
    );
}
