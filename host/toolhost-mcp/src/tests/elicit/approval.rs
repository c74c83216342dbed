//! Approval by policy and by a tool's own definition: prompts cut, declines never run,
//! tasks asking through the task (`input_required`), or refused with nobody to ask.

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
    // A task of a client that cannot be asked (no elicitation declared): asking for a
    // task must not be a way around approval.
    let (registry, ran) = guarded_registry();
    let server =
        McpServer::new(registry).with_approval(ApprovalPolicy::new().confirm_tool("guarded"));
    let mut client = ready(server, false).await;
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
    let (result, statuses) = next_past_statuses(&mut client).await;
    assert_eq!(statuses, ["failed"]);
    assert_eq!(result["id"], 2, "{result}");
    let (text, error) = outcome(&result);
    assert!(
        error && text.contains("not run: this tool needs the user's approval"),
        "{text}"
    );
    assert!(!ran.0.load(Ordering::SeqCst), "the tool must not run");
}

/// The next message that is not a `notifications/tasks/status`, and the statuses told
/// before it.
async fn next_past_statuses(client: &mut Client) -> (Value, Vec<String>) {
    let mut statuses = Vec::new();
    loop {
        let message = client.next_json().await;
        if message["method"] == "notifications/tasks/status" {
            statuses.push(message["params"]["status"].as_str().unwrap().to_owned());
        } else {
            return (message, statuses);
        }
    }
}

#[tokio::test]
async fn a_task_needing_approval_asks_through_the_task_and_runs_only_if_accepted() {
    let (registry, ran) = guarded_registry();
    let server = McpServer::new(registry)
        .with_approval(ApprovalPolicy::new().confirm_tool("guarded"))
        .with_confirm_timeout(Duration::from_millis(500));
    let mut client = ready(server, true).await;
    let start = |id: u64| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "guarded", "arguments": {}, "task": {}}})
        .to_string()
    };
    let on_task = |id: u64, method: &str, task: &Value| {
        json!({"jsonrpc": "2.0", "id": id, "method": method, "params": {"taskId": task}})
            .to_string()
    };
    // Declined: the task is input_required while the question is open, the question
    // names the task, and the tool never runs.
    client.send(&start(1)).await;
    let (created, _) = next_past_statuses(&mut client).await;
    let task = created["result"]["task"]["taskId"].clone();
    assert!(task.is_string(), "{created}");
    let (question, statuses) = next_past_statuses(&mut client).await;
    assert_eq!(statuses, ["input_required"]);
    assert_eq!(question["method"], "elicitation/create", "{question}");
    assert_eq!(
        question["params"]["_meta"],
        json!({"io.modelcontextprotocol/related-task": {"taskId": task}})
    );
    assert_eq!(
        question["params"]["message"],
        "Allow the tool \"guarded\" to run?\nArguments: {}\nPlugin p: files read, http none"
    );
    client.send(&on_task(2, "tasks/get", &task)).await;
    let (got, _) = next_past_statuses(&mut client).await;
    assert_eq!(got["result"]["status"], "input_required", "{got}");
    client
        .send(&respond(&question["id"], &json!({"action": "decline"})))
        .await;
    client.send(&on_task(3, "tasks/result", &task)).await;
    let (result, statuses) = next_past_statuses(&mut client).await;
    assert_eq!(statuses, ["working", "failed"]);
    assert_eq!(
        outcome(&result),
        ("guarded: not run: the user declined this call. Do not retry it; ask the user what to do instead".to_owned(), true)
    );
    assert!(
        !ran.0.load(Ordering::SeqCst),
        "declined: the tool must not run"
    );
    // No answer within the confirm timeout: the same refusal as a plain call's.
    client.send(&start(4)).await;
    let (created, _) = next_past_statuses(&mut client).await;
    let task = created["result"]["task"]["taskId"].clone();
    let (question, _) = next_past_statuses(&mut client).await;
    assert_eq!(question["method"], "elicitation/create");
    let (withdrawn, _) = next_past_statuses(&mut client).await;
    assert_eq!(
        withdrawn["method"], "notifications/cancelled",
        "{withdrawn}"
    );
    assert_eq!(withdrawn["params"]["requestId"], question["id"]);
    client.send(&on_task(5, "tasks/result", &task)).await;
    let (result, statuses) = next_past_statuses(&mut client).await;
    assert_eq!(statuses, ["working", "failed"]);
    let (text, error) = outcome(&result);
    assert!(
        error && text.contains("not run") && text.contains("gave no answer"),
        "{text}"
    );
    assert!(
        !ran.0.load(Ordering::SeqCst),
        "unanswered: the tool must not run"
    );
    // Accepted: the task goes on working and runs the tool.
    client.send(&start(6)).await;
    let (created, _) = next_past_statuses(&mut client).await;
    let task = created["result"]["task"]["taskId"].clone();
    let (question, _) = next_past_statuses(&mut client).await;
    client
        .send(&respond(&question["id"], &json!({"action": "accept"})))
        .await;
    client.send(&on_task(7, "tasks/result", &task)).await;
    let (result, statuses) = next_past_statuses(&mut client).await;
    assert_eq!(statuses, ["working", "completed"]);
    assert_eq!(outcome(&result), ("done".to_owned(), false));
    assert_eq!(
        result["result"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
        task
    );
    assert!(ran.0.load(Ordering::SeqCst), "accepted: the tool runs");
}

/// Calls `erase` through its registry's [`Composer`](toolhost::registry::Composer), as a
/// code tool would, and answers what that call gave.
struct Script;

impl toolhost::registry::Handler for Script {
    fn call(
        &self,
        ctx: CallContext,
        _args: Arguments,
        _env: Environment,
    ) -> toolhost::registry::HandlerFuture {
        Box::pin(async move {
            let Some(composer) = ctx.composer() else {
                return Err(ToolError::failed("no composer"));
            };
            Ok(match composer.call("erase", "{}").await {
                Ok(result) => ToolResult::new(format!("nested: {}", result.content)),
                Err(err) => ToolResult::new(format!("nested failed: {err}")),
            })
        })
    }

    fn composes(&self) -> bool {
        true
    }
}

#[tokio::test]
async fn a_nested_call_of_a_composing_tool_needs_the_same_approval_as_a_direct_one() {
    let (registry, ran) = asking_registry();
    registry
        .register(
            ToolDefinition::new("script", "Runs a program.", json!({"type": "object"})),
            Script,
        )
        .unwrap();
    let server =
        McpServer::new(registry).with_approval(ApprovalPolicy::new().confirm_tool("erase"));
    let mut client = ready(server, true).await;
    client.send(&call_line(1, "script", &json!({}))).await;
    let question = client.next_json().await;
    assert_eq!(
        question["params"]["message"],
        "Allow the tool \"erase\" to run?\nArguments: {}"
    );
    client
        .send(&respond(&question["id"], &json!({"action": "decline"})))
        .await;
    assert_eq!(
        outcome(&client.next_json().await),
        ("nested failed: erase: not run: the user declined this call. Do not retry it; ask the user what to do instead".to_owned(), false)
    );
    assert!(!ran.0.load(Ordering::SeqCst));
    // Accepted: the nested call runs.
    client.send(&call_line(2, "script", &json!({}))).await;
    let question = client.next_json().await;
    client
        .send(&respond(&question["id"], &json!({"action": "accept"})))
        .await;
    assert_eq!(
        outcome(&client.next_json().await),
        ("nested: \"erased\"".to_owned(), false)
    );
    assert!(ran.0.load(Ordering::SeqCst));
}
