//! `Registry::replace_all` and `withdraw`: what hot reload relies on (built-ins kept,
//! order kept, a running call finishes on the version it started with).

use serde_json::json;

use super::*;

fn tool(name: &str, answer: &'static str) -> (ToolDefinition, Arc<dyn Handler>) {
    let handler = move |_ctx: CallContext, _args: Arguments, _env: Environment| async move {
        Ok(ToolResult::new(answer))
    };
    (
        ToolDefinition::new(name, "A test tool.", json!({"type": "object"})),
        Arc::new(handler),
    )
}

async fn call(registry: &Registry, name: &str) -> Result<ToolResult, ToolError> {
    registry
        .dispatch(
            &CallContext::new(),
            &ToolCall::new(name, ""),
            &Environment::default(),
        )
        .await
}

#[tokio::test]
async fn replace_swaps_in_place_and_counts_generations() {
    let registry = Registry::new();
    assert_eq!(registry.generation(), 0);
    let mut changes = registry.changes();
    registry.register_all(vec![tool("a", "a1")]).unwrap();
    registry
        .register_all(vec![tool("p1", "old"), tool("p2", "old")])
        .unwrap();
    registry.register_all(vec![tool("z", "z1")]).unwrap();
    assert_eq!(registry.generation(), 3);
    assert!(changes.has_changed().unwrap());
    assert_eq!(*changes.borrow_and_update(), 3);

    // The plugin's new version has one tool renamed: it takes the old tools' place.
    registry
        .replace_all(
            &["p1".into(), "p2".into()],
            vec![tool("p1", "new"), tool("p3", "new")],
        )
        .unwrap();
    assert_eq!(registry.names(), ["a", "p1", "p3", "z"]);
    assert_eq!(registry.generation(), 4);
    assert_eq!(call(&registry, "p1").await.unwrap().content, "new");
    assert!(matches!(
        call(&registry, "p2").await,
        Err(ToolError::UnknownTool { .. })
    ));

    // Unloading: nothing added.
    registry
        .replace_all(&["p1".into(), "p3".into()], Vec::new())
        .unwrap();
    assert_eq!(registry.names(), ["a", "z"]);
    assert_eq!(*changes.borrow_and_update(), 5);
}

#[tokio::test]
async fn withdraw_takes_away_built_ins_too_and_they_come_back_only_as_built_ins() {
    let registry = Registry::new();
    registry
        .register_builtin(
            tool("read_file", "builtin").0,
            |_ctx: CallContext, _a: Arguments, _e: Environment| async move {
                Ok(ToolResult::new("builtin"))
            },
        )
        .unwrap();
    registry.register_all(vec![tool("p1", "p")]).unwrap();
    let generation = registry.generation();
    assert_eq!(registry.withdraw(&["nope".into()]), 0);
    assert_eq!(registry.generation(), generation, "nothing gone: no change");
    assert_eq!(registry.withdraw(&["read_file".into(), "nope".into()]), 1);
    assert_eq!(registry.generation(), generation + 1);
    assert_eq!(registry.names(), ["p1"]);
    assert!(matches!(
        call(&registry, "read_file").await,
        Err(ToolError::UnknownTool { .. })
    ));
    // Its name is still the host's: an outside tool cannot take it.
    assert!(matches!(
        registry.register_all(vec![tool("read_file", "impostor")]),
        Err(RegisterError::Reserved { .. })
    ));
}

#[tokio::test]
async fn a_refused_replacement_changes_nothing() {
    let registry = Registry::new();
    registry
        .register_builtin(
            tool("read_file", "builtin").0,
            |_ctx: CallContext, _a: Arguments, _e: Environment| async move {
                Ok(ToolResult::new("builtin"))
            },
        )
        .unwrap();
    registry
        .register_all(vec![tool("p1", "old"), tool("other", "o")])
        .unwrap();
    let generation = registry.generation();
    // A look-alike of a tool that stays.
    let err = registry
        .replace_all(&["p1".into()], vec![tool("p1", "new"), tool("OTHER", "x")])
        .unwrap_err();
    assert!(
        matches!(err, RegisterError::LookAlike { ref name, .. } if name == "OTHER"),
        "{err:?}"
    );
    // A built-in is never removed, nor a tool that is not there.
    for name in ["read_file", "missing"] {
        let err = registry
            .replace_all(&[name.into()], Vec::new())
            .unwrap_err();
        assert_eq!(err, RegisterError::NotRemovable { name: name.into() });
    }
    assert_eq!(registry.names(), ["read_file", "p1", "other"]);
    assert_eq!(registry.generation(), generation);
    assert_eq!(call(&registry, "p1").await.unwrap().content, "old");
    // The removed names are free for the new tools: no clash with the old p1.
    registry
        .replace_all(&["p1".into()], vec![tool("P1", "renamed")])
        .unwrap();
    assert_eq!(registry.names(), ["read_file", "P1", "other"]);
}

#[tokio::test]
async fn a_call_in_flight_finishes_on_its_version() {
    let registry = Arc::new(Registry::new());
    let (release, wait) = tokio::sync::oneshot::channel::<()>();
    let wait = Arc::new(std::sync::Mutex::new(Some(wait)));
    let started = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = Arc::clone(&started);
    let slow = move |_ctx: CallContext, _args: Arguments, _env: Environment| {
        let wait = wait.lock().unwrap().take();
        flag.store(true, std::sync::atomic::Ordering::SeqCst);
        async move {
            if let Some(wait) = wait {
                let _ = wait.await;
            }
            Ok(ToolResult::new("old version"))
        }
    };
    registry
        .register_shared(
            ToolDefinition::new("p", "Slow.", json!({"type": "object"})),
            Some(Arc::new(slow)),
        )
        .unwrap();
    let running = tokio::spawn({
        let registry = Arc::clone(&registry);
        async move { call(&registry, "p").await }
    });
    while !started.load(std::sync::atomic::Ordering::SeqCst) {
        tokio::task::yield_now().await;
    }
    registry
        .replace_all(&["p".into()], vec![tool("p", "new version")])
        .unwrap();
    assert_eq!(call(&registry, "p").await.unwrap().content, "new version");
    release.send(()).unwrap();
    assert_eq!(running.await.unwrap().unwrap().content, "old version");
}
