//! Approval by policy and by a tool's own definition: prompts cut, declines never run,
//! tasks (nobody to ask) refused.

use super::*;

#[tokio::test]
async fn an_approval_prompt_for_ten_mebibytes_of_arguments_is_cut() {
    let (registry, ran) = asking_registry();
    let server =
        McpServer::new(registry).with_approval(ApprovalPolicy::new().confirm_tool("erase"));
    let mut client = ready(server, true).await;
    let huge = "x".repeat(10 << 20);
    client
        .send(&call_line(1, "erase", &json!({"content": huge})))
        .await;
    let line = client.answer_within(WAIT).await.unwrap();
    assert!(line.len() < 2048, "the question is {} bytes", line.len());
    let question: Value = serde_json::from_str(&line).unwrap();
    let message = question["params"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("Allow the tool \"erase\" to run?\nArguments: {\"content\":\"xxx"),
        "{message}"
    );
    assert!(
        message.ends_with(&format!(
            " … (cut: the arguments are {} bytes in all, only the first 1024 are shown)",
            huge.len() + 14
        )),
        "{message}"
    );
    client
        .send(&respond(&question["id"], &json!({"action": "decline"})))
        .await;
    let (text, error) = outcome(&client.next_json().await);
    assert!(error && text.contains("the user declined"), "{text}");
    assert!(!ran.0.load(Ordering::SeqCst));
}

#[tokio::test]
async fn a_declined_or_dismissed_call_never_runs_and_an_accepted_one_does() {
    let (registry, ran) = asking_registry();
    let server = McpServer::new(registry).with_approval(
        ApprovalPolicy::new()
            .confirm_destructive()
            .with_note("erase", "grants: write /data"),
    );
    let mut client = ready(server, true).await;
    for (id, action) in [(1, "decline"), (2, "cancel")] {
        client
            .send(&call_line(id, "erase", &json!({"path": "a"})))
            .await;
        let question = client.next_json().await;
        assert_eq!(
            question["params"]["message"],
            "Allow the tool \"erase\" to run?\nArguments: {\"path\":\"a\"}\ngrants: write /data"
        );
        assert_eq!(
            question["params"]["requestedSchema"],
            json!({"type": "object", "properties": {}})
        );
        client
            .send(&respond(&question["id"], &json!({"action": action})))
            .await;
        assert_eq!(
            outcome(&client.next_json().await),
            ("erase: not run: the user declined this call. Do not retry it; ask the user what to do instead".to_owned(), true)
        );
        assert!(
            !ran.0.load(Ordering::SeqCst),
            "{action}: the tool must not run"
        );
    }
    // An error response is no approval either.
    client.send(&call_line(3, "erase", &json!({}))).await;
    let question = client.next_json().await;
    client
        .send(&json!({"jsonrpc": "2.0", "id": question["id"], "error": {"code": -32601, "message": "no"}}).to_string())
        .await;
    let (text, error) = outcome(&client.next_json().await);
    assert!(
        error && text.contains("the client answered the question with an error"),
        "{text}"
    );
    assert!(!ran.0.load(Ordering::SeqCst));
    // Accepted: it runs.
    client.send(&call_line(4, "erase", &json!({}))).await;
    let question = client.next_json().await;
    client
        .send(&respond(&question["id"], &json!({"action": "accept"})))
        .await;
    assert_eq!(
        outcome(&client.next_json().await),
        ("erased".to_owned(), false)
    );
    assert!(ran.0.load(Ordering::SeqCst));
}

/// `guarded`: a tool whose own definition asks for approval (as a plugin manifest's
/// `confirm = true` makes it), recording whether it ran; optional as a task.
fn guarded_registry() -> (Arc<Registry>, Arc<Ran>) {
    let ran: Arc<Ran> = Arc::default();
    let state = Arc::clone(&ran);
    let registry = Registry::new();
    registry
        .register(
            ToolDefinition::new("guarded", "Guarded.", json!({"type": "object"}))
                .with_approval(true, Some("Plugin p: files read, http none".into()))
                .with_task_support(toolhost::registry::TaskSupport::Optional),
            move |_ctx: CallContext, _args: Arguments, _env: Environment| {
                let state = Arc::clone(&state);
                async move {
                    state.0.store(true, Ordering::SeqCst);
                    Ok(ToolResult::new("done"))
                }
            },
        )
        .unwrap();
    (Arc::new(registry), ran)
}

#[tokio::test]
async fn a_tool_whose_definition_asks_for_approval_is_asked_about_without_any_policy() {
    // No --confirm at all: the definition alone (a plugin loaded, or reloaded, with
    // confirm = true) makes the server ask, showing the plugin's grants.
    let (registry, ran) = guarded_registry();
    let mut client = ready(McpServer::new(registry), true).await;
    client.send(&call_line(1, "guarded", &json!({}))).await;
    let question = client.next_json().await;
    assert_eq!(
        question["params"]["message"],
        "Allow the tool \"guarded\" to run?\nArguments: {}\nPlugin p: files read, http none"
    );
    client
        .send(&respond(&question["id"], &json!({"action": "decline"})))
        .await;
    let (text, error) = outcome(&client.next_json().await);
    assert!(
        error && text.contains("not run: the user declined"),
        "{text}"
    );
    assert!(!ran.0.load(Ordering::SeqCst), "the tool must not run");
}

#[tokio::test]
async fn a_call_needing_approval_run_as_a_task_is_refused_never_run() {
    // A task has nobody to ask: asking for one must not be a way around approval.
    let (registry, ran) = guarded_registry();
    let server =
        McpServer::new(registry).with_approval(ApprovalPolicy::new().confirm_tool("guarded"));
    let mut client = ready(server, true).await;
    client
        .send(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "guarded", "arguments": {}, "task": {}}})
            .to_string(),
        )
        .await;
    let created = client.next_json().await;
    let task = created["result"]["task"]["taskId"].clone();
    assert!(task.is_string(), "{created}");
    client
        .send(
            &json!({"jsonrpc": "2.0", "id": 2, "method": "tasks/result",
            "params": {"taskId": task}})
            .to_string(),
        )
        .await;
    let result = client.next_json().await;
    assert_eq!(result["id"], 2, "{result}");
    let (text, error) = outcome(&result);
    assert!(
        error && text.contains("not run: this tool needs the user's approval"),
        "{text}"
    );
    assert!(!ran.0.load(Ordering::SeqCst), "the tool must not run");
}
