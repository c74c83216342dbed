//! Sampling (`sampling/createMessage`) over stdio, legacy revisions and 2026-07-28: only
//! a client that declared sampling is sent a request, on the call's channel with the
//! session's question ids; a request over the size limit never leaves; answers that are
//! malformed, huge, of a wrong role or an error are refused; a call run as a task has
//! nobody to sample; a call sends at most 16; a modern call samples through
//! `input_required` rounds.

use toolhost::registry::{InteractionError, SamplingRequest, TaskSupport, ToolError};

use super::*;

/// `summarise` (samples once: `{"text" | "repeat", "max_tokens"?}`, and says what the model
/// answered), `sample_many` (`{"count"}` requests in a row, counting the answers), both
/// allowed as tasks.
pub(crate) fn sampling_registry() -> Arc<Registry> {
    let registry = Registry::new();
    registry
        .register(
            ToolDefinition::new("summarise", "Summarise.", json!({"type": "object"}))
                .with_task_support(TaskSupport::Optional),
            |ctx: CallContext, args: Arguments, _env: Environment| async move {
                let Some(interaction) = ctx.interaction() else {
                    return Err(ToolError::failed("no interaction"));
                };
                // `repeat`: a text of that many bytes, made here (a 50 MB line would not
                // get through the transport's own limit).
                let text = match args.get("repeat").and_then(Value::as_u64) {
                    Some(n) => "x".repeat(usize::try_from(n).unwrap()),
                    None => args
                        .get("text")
                        .and_then(Value::as_str)
                        .unwrap_or("Hi")
                        .to_owned(),
                };
                let tokens = args.get("max_tokens").and_then(Value::as_u64).unwrap_or(50);
                let request = SamplingRequest::new(
                    vec![SamplingRequest::user_text(text)],
                    u32::try_from(tokens).unwrap(),
                )
                .with_system_prompt("Be brief.");
                match interaction.sample(request).await {
                    Ok(answer) => Ok(ToolResult::new(format!(
                        "{} ({:?}, {:?}): {}",
                        answer.model,
                        answer.role,
                        answer.stop_reason,
                        serde_json::to_string(&answer.content).unwrap()
                    ))),
                    Err(err) => Err(ToolError::failed(format!("{}: {err}", kind(&err)))),
                }
            },
        )
        .unwrap();
    registry
        .register(
            ToolDefinition::new(
                "sample_many",
                "Sample many times.",
                json!({"type": "object"}),
            ),
            |ctx: CallContext, args: Arguments, _env: Environment| async move {
                let Some(interaction) = ctx.interaction() else {
                    return Err(ToolError::failed("no interaction"));
                };
                let count = args.get("count").and_then(Value::as_u64).unwrap_or(1);
                let (mut answered, mut last_error) = (0, String::new());
                for n in 0..count {
                    let request =
                        SamplingRequest::new(vec![SamplingRequest::user_text(format!("{n}"))], 5);
                    match interaction.sample(request).await {
                        Ok(_) => answered += 1,
                        Err(err) => last_error = format!("{}: {err}", kind(&err)),
                    }
                }
                Ok(ToolResult::new(format!(
                    "{answered} answered; {last_error}"
                )))
            },
        )
        .unwrap();
    Arc::new(registry.with_call_timeout(Duration::from_secs(20)))
}

fn kind(err: &InteractionError) -> &'static str {
    match err {
        InteractionError::NotAllowed(_) => "not allowed",
        InteractionError::Unsupported(_) => "unsupported",
        InteractionError::TimedOut(_) => "timed out",
        InteractionError::Invalid(_) => "invalid",
    }
}

const WAIT: Duration = Duration::from_secs(10);

/// A client of `revision` that initialized with `capabilities` and read the answer.
async fn ready(server: McpServer, revision: &str, capabilities: Value) -> Client {
    let (mut client, _serving) = serve_client(server);
    client
        .send(
            &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": revision, "capabilities": capabilities,
                "clientInfo": {"name": "t", "version": "1"}}})
            .to_string(),
        )
        .await;
    let answer = client.answer_within(WAIT).await.unwrap();
    assert!(
        answer.contains(&format!("\"protocolVersion\":\"{revision}\"")),
        "{answer}"
    );
    client
}

async fn next(client: &mut Client) -> Value {
    let line = client.answer_within(WAIT).await.expect("a message in time");
    serde_json::from_str(&line).unwrap()
}

fn call(id: u64, tool: &str, arguments: &Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": tool, "arguments": arguments}})
    .to_string()
}

fn respond(id: &Value, result: &Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string()
}

/// The text of a `tools/call` result and whether it is an error.
fn outcome(message: &Value) -> (String, bool) {
    let result = &message["result"];
    (
        result["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        result["isError"].as_bool().unwrap(),
    )
}

fn good_answer() -> Value {
    json!({"role": "assistant", "content": {"type": "text", "text": "Short."},
        "model": "test-model", "stopReason": "endTurn"})
}

#[tokio::test]
async fn every_legacy_revision_that_declared_sampling_gets_create_message_on_the_calls_channel() {
    for revision in ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"] {
        let server = McpServer::new(sampling_registry());
        let mut client = ready(server, revision, json!({"sampling": {}})).await;
        client
            .send(&call(1, "summarise", &json!({"text": "A long text."})))
            .await;
        let request = next(&mut client).await;
        assert_eq!(request["method"], "sampling/createMessage", "{revision}");
        assert_eq!(
            request["params"],
            json!({
                "messages": [{"role": "user", "content": {"type": "text", "text": "A long text."}}],
                "systemPrompt": "Be brief.",
                "maxTokens": 50,
            })
        );
        let id = request["id"].clone();
        assert!(id.as_str().unwrap().starts_with("toolhost-ask-"), "{id}");
        client.send(&respond(&id, &good_answer())).await;
        let answer = next(&mut client).await;
        assert_eq!(answer["id"], 1);
        assert_eq!(
            outcome(&answer),
            (
                r#"test-model (Assistant, Some("endTurn")): {"type":"text","text":"Short."}"#
                    .to_owned(),
                false
            ),
            "{revision}"
        );
    }
}

#[tokio::test]
async fn a_client_without_the_capability_is_never_sent_a_request() {
    // Elicitation only: the call has an interaction, which refuses to sample.
    let server = McpServer::new(sampling_registry());
    let mut client = ready(server, "2025-11-25", json!({"elicitation": {}})).await;
    client.send(&call(1, "summarise", &json!({}))).await;
    let answer = next(&mut client).await;
    assert_eq!(
        answer["id"], 1,
        "nothing may be sent to this client: {answer}"
    );
    assert_eq!(
        outcome(&answer),
        ("summarise: unsupported: the client's model cannot be asked: this client did not declare the sampling capability".to_owned(), true)
    );
    // Nothing declared: no interaction at all, as before.
    let server = McpServer::new(sampling_registry());
    let mut client = ready(server, "2025-11-25", json!({})).await;
    client.send(&call(2, "summarise", &json!({}))).await;
    assert_eq!(
        outcome(&next(&mut client).await),
        ("summarise: no interaction".to_owned(), true)
    );
    // `sampling` that is not an object declares nothing.
    let server = McpServer::new(sampling_registry());
    let mut client = ready(server, "2025-11-25", json!({"sampling": true})).await;
    client.send(&call(3, "summarise", &json!({}))).await;
    assert_eq!(
        outcome(&next(&mut client).await),
        ("summarise: no interaction".to_owned(), true)
    );
}

#[tokio::test]
async fn a_50_mb_message_is_refused_before_anything_is_sent() {
    let server = McpServer::new(sampling_registry());
    let mut client = ready(server, "2025-11-25", json!({"sampling": {}})).await;
    client
        .send(&call(1, "summarise", &json!({ "repeat": 50_000_000 })))
        .await;
    let answer = next(&mut client).await;
    assert_eq!(
        answer["id"],
        1,
        "nothing may be sent for it: {}",
        &answer.to_string()[..200]
    );
    assert_eq!(
        outcome(&answer),
        ("summarise: invalid: the request carries 50000009 bytes (messages, system prompt, stop sequences, model hints), over the limit of 65536; send less".to_owned(), true)
    );
}

#[tokio::test]
async fn malformed_huge_wrong_role_and_error_answers_are_refused() {
    let huge = json!({"role": "assistant", "content": {"type": "text", "text": "a".repeat(2 << 20)},
        "model": "m"});
    let huge_len = huge.to_string().len();
    let cases = [
        (
            json!({"role": "system", "content": {"type": "text", "text": "x"}, "model": "m"}),
            "summarise: invalid: the client's answer is not a sampling result: \"role\" must be \"assistant\" or \"user\"".to_owned(),
        ),
        (
            json!({"role": "assistant", "content": {"type": "resource_link", "uri": "file:///etc/passwd", "name": "p"}, "model": "m"}),
            "summarise: invalid: the client's answer is not a sampling result: \"content\" must be a text, image or audio block".to_owned(),
        ),
        (
            json!({"role": "assistant", "content": {"type": "text", "text": "x"}}),
            "summarise: invalid: the client's answer is not a sampling result: \"model\" must be a string".to_owned(),
        ),
        (
            json!("not an object"),
            "summarise: invalid: the client's answer is not a sampling result: \"role\" must be \"assistant\" or \"user\"".to_owned(),
        ),
        (
            huge,
            format!("summarise: invalid: the client's answer is {huge_len} bytes, over the 1048576-byte limit for a sampling answer; it was not read"),
        ),
    ];
    let server = McpServer::new(sampling_registry());
    let mut client = ready(server, "2025-06-18", json!({"sampling": {}})).await;
    for (n, (bad, message)) in cases.into_iter().enumerate() {
        let id = u64::try_from(n).unwrap() + 1;
        client.send(&call(id, "summarise", &json!({}))).await;
        let request = next(&mut client).await;
        client.send(&respond(&request["id"], &bad)).await;
        let answer = next(&mut client).await;
        assert_eq!(answer["id"], id);
        assert_eq!(outcome(&answer), (message, true));
    }
    // An error response (the user refused): the call hears it.
    client.send(&call(9, "summarise", &json!({}))).await;
    let request = next(&mut client).await;
    client
        .send(
            &json!({"jsonrpc": "2.0", "id": request["id"], "error": {"code": -1, "message": "User rejected sampling request"}})
                .to_string(),
        )
        .await;
    assert_eq!(
        outcome(&next(&mut client).await),
        (r#"summarise: unsupported: the client answered the sampling request with an error: {"code":-1,"message":"User rejected sampling request"}"#.to_owned(), true)
    );
    // The session still samples.
    client.send(&call(10, "summarise", &json!({}))).await;
    let request = next(&mut client).await;
    client.send(&respond(&request["id"], &good_answer())).await;
    assert!(!outcome(&next(&mut client).await).1);
}

#[tokio::test]
async fn a_client_that_never_answers_times_the_request_out() {
    let server =
        McpServer::new(sampling_registry()).with_confirm_timeout(Duration::from_millis(300));
    let mut client = ready(server, "2025-11-25", json!({"sampling": {}})).await;
    client.send(&call(1, "summarise", &json!({}))).await;
    let request = next(&mut client).await;
    let withdrawn = next(&mut client).await;
    assert_eq!(withdrawn["method"], "notifications/cancelled");
    assert_eq!(withdrawn["params"]["requestId"], request["id"]);
    assert_eq!(
        outcome(&next(&mut client).await),
        ("summarise: timed out: the client's model gave no answer within 0.3 s (the confirm timeout)".to_owned(), true)
    );
}

#[tokio::test]
async fn one_call_sends_at_most_16_requests() {
    let server = McpServer::new(sampling_registry());
    let mut client = ready(server, "2025-11-25", json!({"sampling": {}})).await;
    client
        .send(&call(1, "sample_many", &json!({"count": 1000})))
        .await;
    for _ in 0..16 {
        let request = next(&mut client).await;
        assert_eq!(request["method"], "sampling/createMessage");
        client.send(&respond(&request["id"], &good_answer())).await;
    }
    let answer = next(&mut client).await;
    assert_eq!(answer["id"], 1, "no 17th request: {answer}");
    assert_eq!(
        outcome(&answer),
        ("16 answered; invalid: this call has sent 16 sampling requests, the most one call may send".to_owned(), false)
    );
}

#[tokio::test]
async fn a_call_run_as_a_task_cannot_sample() {
    let server = McpServer::new(sampling_registry());
    let mut client = ready(server, "2025-11-25", json!({"sampling": {}})).await;
    client
        .send(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "summarise", "arguments": {}, "task": {}}})
            .to_string(),
        )
        .await;
    let created = next(&mut client).await;
    let task = created["result"]["task"]["taskId"].clone();
    assert!(task.is_string(), "{created}");
    client
        .send(
            &json!({"jsonrpc": "2.0", "id": 2, "method": "tasks/result",
            "params": {"taskId": task}})
            .to_string(),
        )
        .await;
    // The task's status changes are told (notifications/tasks/status); no request goes out.
    let mut result = next(&mut client).await;
    while result["method"] == "notifications/tasks/status" {
        result = next(&mut client).await;
    }
    assert_eq!(
        result["id"], 2,
        "no request may go out for a task: {result}"
    );
    assert_eq!(
        outcome(&result),
        ("summarise: no interaction".to_owned(), true)
    );
}

/// A 2026-07-28 `tools/call` whose client capabilities are `capabilities`, with
/// `inputResponses` and `requestState` when given.
fn modern_call(id: u64, capabilities: &Value, input: Option<(&Value, &Value)>) -> String {
    let mut params = json!({"name": "summarise", "arguments": {"text": "Hi"}, "_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    }});
    if let Some((responses, state)) = input {
        params["inputResponses"] = responses.clone();
        params["requestState"] = state.clone();
    }
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}).to_string()
}

#[tokio::test]
async fn modern_sampling_goes_through_input_required_rounds() {
    let (mut client, _serving) = serve_client(McpServer::new(sampling_registry()));
    let samples = json!({"sampling": {}});
    client.send(&modern_call(1, &samples, None)).await;
    let first = next(&mut client).await;
    let result = &first["result"];
    assert_eq!(result["resultType"], "input_required", "{first}");
    let request = &result["inputRequests"]["q0"];
    assert_eq!(request["method"], "sampling/createMessage");
    assert_eq!(request["params"]["maxTokens"], 50);
    assert_eq!(
        request["params"]["messages"],
        json!([{"role": "user", "content": {"type": "text", "text": "Hi"}}])
    );
    let state = result["requestState"].clone();

    // A malformed answer is refused, not passed to the tool.
    let bad =
        json!({"q0": {"role": "system", "content": {"type": "text", "text": "x"}, "model": "m"}});
    client
        .send(&modern_call(2, &samples, Some((&bad, &state))))
        .await;
    assert_eq!(
        outcome(&next(&mut client).await),
        ("summarise: invalid: the client's answer is not a sampling result: \"role\" must be \"assistant\" or \"user\"".to_owned(), true)
    );
    // A good one completes the call.
    let good = json!({ "q0": good_answer() });
    client
        .send(&modern_call(3, &samples, Some((&good, &state))))
        .await;
    let done = next(&mut client).await;
    assert_eq!(done["result"]["resultType"], "complete");
    assert_eq!(
        outcome(&done),
        (
            r#"test-model (Assistant, Some("endTurn")): {"type":"text","text":"Short."}"#
                .to_owned(),
            false
        )
    );
    // Capabilities without sampling (elicitation only): unsupported, never asked.
    client
        .send(&modern_call(4, &json!({"elicitation": {}}), None))
        .await;
    let refused = next(&mut client).await;
    assert_eq!(refused["result"]["resultType"], "complete", "{refused}");
    assert_eq!(
        outcome(&refused),
        ("summarise: unsupported: the client's model cannot be asked: this request's client capabilities do not declare sampling".to_owned(), true)
    );
    // None at all: no interaction.
    client.send(&modern_call(5, &json!({}), None)).await;
    assert_eq!(
        outcome(&next(&mut client).await),
        ("summarise: no interaction".to_owned(), true)
    );
}
