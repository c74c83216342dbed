//! Hostile clients of elicitation and approval over stdio: answers that do not match
//! the question, no answer at all, no capability, forged and unsolicited responses,
//! huge arguments in an approval prompt, and a declined call.

use std::sync::atomic::AtomicBool;

use toolhost::registry::{InteractionError, ToolAnnotations, ToolError};

use super::*;
use crate::ApprovalPolicy;

/// Whether `erase` ran.
#[derive(Default)]
pub(crate) struct Ran(pub(crate) AtomicBool);

/// `ask_name` (asks the user for a name through its call's interaction, and says what it
/// got), `erase` (no annotations: destructive by MCP's defaults; records that it ran)
/// and `look` (read-only).
pub(crate) fn asking_registry() -> (Arc<Registry>, Arc<Ran>) {
    let ran: Arc<Ran> = Arc::default();
    let registry = Registry::new();
    registry
        .register(
            ToolDefinition::new("ask_name", "Ask.", json!({"type": "object"})),
            |ctx: CallContext, _args: Arguments, _env: Environment| async move {
                let Some(interaction) = ctx.interaction() else {
                    return Err(ToolError::failed("no interaction"));
                };
                let schema = json!({
                    "type": "object",
                    "properties": {"name": {"type": "string", "maxLength": 20}},
                    "required": ["name"],
                });
                match interaction.ask("Your name?".into(), schema).await {
                    Ok(Some(answer)) => Ok(ToolResult::new(format!("got {answer}"))),
                    Ok(None) => Ok(ToolResult::new("declined")),
                    Err(err) => Err(ToolError::failed(format!(
                        "{}: {err}",
                        match err {
                            InteractionError::NotAllowed(_) => "not allowed",
                            InteractionError::Unsupported(_) => "unsupported",
                            InteractionError::TimedOut(_) => "timed out",
                            InteractionError::Invalid(_) => "invalid",
                        }
                    ))),
                }
            },
        )
        .unwrap();
    registry
        .register(
            ToolDefinition::new(
                "ask_schema",
                "Ask with the schema given.",
                json!({"type": "object"}),
            ),
            |ctx: CallContext, args: Arguments, _env: Environment| async move {
                let Some(interaction) = ctx.interaction() else {
                    return Err(ToolError::failed("no interaction"));
                };
                let schema = args.get("schema").cloned().unwrap_or_default();
                match interaction.ask("Fill in.".into(), schema).await {
                    Ok(answer) => Ok(ToolResult::new(format!(
                        "Elicitation completed: content={}",
                        answer.unwrap_or_default()
                    ))),
                    Err(err) => Err(ToolError::failed(err.to_string())),
                }
            },
        )
        .unwrap();
    registry
        .register(
            ToolDefinition::new(
                "ask_twice",
                "Ask two questions at once.",
                json!({"type": "object"}),
            ),
            |ctx: CallContext, _args: Arguments, _env: Environment| async move {
                let Some(interaction) = ctx.interaction() else {
                    return Err(ToolError::failed("no interaction"));
                };
                let (first, second) = tokio::join!(
                    interaction.confirm("First?".into()),
                    interaction.confirm("Second?".into())
                );
                Ok(ToolResult::new(format!("{first:?} / {second:?}")))
            },
        )
        .unwrap();
    let state = Arc::clone(&ran);
    registry
        .register(
            ToolDefinition::new("erase", "Erase.", json!({"type": "object"})),
            move |_ctx: CallContext, _args: Arguments, _env: Environment| {
                let state = Arc::clone(&state);
                async move {
                    state.0.store(true, Ordering::SeqCst);
                    Ok(ToolResult::new("erased"))
                }
            },
        )
        .unwrap();
    registry
        .register(
            ToolDefinition::new("look", "Look.", json!({"type": "object"}))
                .with_annotations(ToolAnnotations::read_only()),
            |_ctx: CallContext, _args: Arguments, _env: Environment| async move {
                Ok(ToolResult::new("looked"))
            },
        )
        .unwrap();
    (
        Arc::new(registry.with_call_timeout(Duration::from_secs(20))),
        ran,
    )
}

pub(crate) fn initialize(elicitation: bool) -> String {
    let capabilities = if elicitation {
        json!({"elicitation": {}})
    } else {
        json!({})
    };
    json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": capabilities,
        "clientInfo": {"name": "t", "version": "1"}}})
    .to_string()
}

pub(crate) fn call_line(id: u64, tool: &str, arguments: &Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": tool, "arguments": arguments}})
    .to_string()
}

const WAIT: Duration = Duration::from_secs(10);

/// A client that initialized (with or without elicitation) and read the answer.
async fn ready(server: McpServer, elicitation: bool) -> Client {
    let (mut client, _serving) = serve_client(server);
    client.send(&initialize(elicitation)).await;
    let answer = client.answer_within(WAIT).await.unwrap();
    assert!(
        answer.contains("\"protocolVersion\":\"2025-11-25\""),
        "{answer}"
    );
    client
}

impl Client {
    async fn next_json(&mut self) -> Value {
        let line = self.answer_within(WAIT).await.expect("a message in time");
        serde_json::from_str(&line).unwrap()
    }
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

fn respond(id: &Value, result: &Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string()
}

#[tokio::test]
async fn an_answer_that_does_not_match_the_schema_is_refused() {
    let (registry, _) = asking_registry();
    let mut client = ready(McpServer::new(registry), true).await;
    client.send(&call_line(1, "ask_name", &json!({}))).await;
    let question = client.next_json().await;
    assert_eq!(question["method"], "elicitation/create");
    assert_eq!(question["params"]["mode"], "form");
    assert_eq!(question["params"]["message"], "Your name?");
    assert_eq!(
        question["params"]["requestedSchema"]["required"],
        json!(["name"])
    );
    let id = question["id"].clone();
    assert!(id.as_str().unwrap().starts_with("toolhost-ask-"), "{id}");
    client
        .send(&respond(
            &id,
            &json!({"action": "accept", "content": {"name": 5}}),
        ))
        .await;
    let answer = client.next_json().await;
    assert_eq!(answer["id"], 1);
    assert_eq!(
        outcome(&answer),
        (
            "ask_name: invalid: the answer does not match the question's schema: \"name\" must be a string".to_owned(),
            true
        )
    );

    // A second question, answered with a field the question has not: refused too; a
    // good answer after that reaches the tool.
    client.send(&call_line(2, "ask_name", &json!({}))).await;
    let id = client.next_json().await["id"].clone();
    client
        .send(&respond(
            &id,
            &json!({"action": "accept", "content": {"name": "Ada", "admin": true}}),
        ))
        .await;
    let (text, error) = outcome(&client.next_json().await);
    assert!(
        error && text.contains("\"admin\" is not a field of the question"),
        "{text}"
    );
    client.send(&call_line(3, "ask_name", &json!({}))).await;
    let id = client.next_json().await["id"].clone();
    client
        .send(&respond(
            &id,
            &json!({"action": "accept", "content": {"name": "Ada"}}),
        ))
        .await;
    assert_eq!(
        outcome(&client.next_json().await),
        ("got {\"name\":\"Ada\"}".to_owned(), false)
    );
}

#[tokio::test]
async fn a_client_that_never_answers_times_out_the_call_is_not_run_and_its_slot_is_freed() {
    let (registry, ran) = asking_registry();
    let server = McpServer::new(registry)
        .with_max_in_flight(NonZeroUsize::new(1).unwrap())
        .with_approval(ApprovalPolicy::new().confirm_tool("erase"))
        .with_confirm_timeout(Duration::from_millis(300));
    let mut client = ready(server, true).await;
    client
        .send(&call_line(1, "erase", &json!({"path": "/"})))
        .await;
    let question = client.next_json().await;
    assert_eq!(question["method"], "elicitation/create");
    let id = question["id"].clone();
    // No answer: the question is withdrawn, the call refused.
    let withdrawn = client.next_json().await;
    assert_eq!(withdrawn["method"], "notifications/cancelled");
    assert_eq!(withdrawn["params"]["requestId"], id);
    let answer = client.next_json().await;
    assert_eq!(answer["id"], 1);
    assert_eq!(
        outcome(&answer),
        ("erase: not run: no approval from the user (the user gave no answer within 0.3 s (the confirm timeout)). Ask the user before trying again".to_owned(), true)
    );
    assert!(!ran.0.load(Ordering::SeqCst), "the tool must not run");
    // The one slot is free again: another call runs.
    client.send(&call_line(2, "look", &json!({}))).await;
    assert_eq!(
        outcome(&client.next_json().await),
        ("looked".to_owned(), false)
    );
    // A late answer to the withdrawn question runs nothing.
    client
        .send(&respond(&id, &json!({"action": "accept"})))
        .await;
    client.send(&call_line(3, "look", &json!({}))).await;
    assert_eq!(client.next_json().await["id"], 3);
    assert!(!ran.0.load(Ordering::SeqCst));
}

#[tokio::test]
async fn a_client_without_the_capability_is_refused_never_run() {
    let (registry, ran) = asking_registry();
    let server =
        McpServer::new(registry).with_approval(ApprovalPolicy::new().confirm_destructive());
    let mut client = ready(server, false).await;
    client.send(&call_line(1, "erase", &json!({}))).await;
    let answer = client.next_json().await;
    assert_eq!(
        answer["id"], 1,
        "no question may go to this client: {answer}"
    );
    let (text, error) = outcome(&answer);
    assert!(error, "{text}");
    assert!(
        text.starts_with("erase: not run: this tool needs the user's approval, and this client cannot ask its user"),
        "{text}"
    );
    assert!(!ran.0.load(Ordering::SeqCst), "the tool must not run");
    // A read-only tool needs no approval under `destructive`.
    client.send(&call_line(2, "look", &json!({}))).await;
    assert_eq!(
        outcome(&client.next_json().await),
        ("looked".to_owned(), false)
    );
    // Without a policy, a tool that asks gets no interaction at all.
    let (registry, _) = asking_registry();
    let mut client = ready(McpServer::new(registry), false).await;
    client.send(&call_line(3, "ask_name", &json!({}))).await;
    assert_eq!(
        outcome(&client.next_json().await),
        ("ask_name: no interaction".to_owned(), true)
    );
}

#[tokio::test]
async fn forged_and_unsolicited_responses_are_ignored_and_the_real_answer_still_counts() {
    let (registry, _) = asking_registry();
    let mut client = ready(McpServer::new(registry), true).await;
    client.send(&call_line(1, "ask_name", &json!({}))).await;
    let id = client.next_json().await["id"].clone();
    let real = id.as_str().unwrap().to_owned();
    // A flood of responses to questions never asked: guessed ids of the same form, the
    // client's own request ids, numbers.
    let forged = format!("{}9", &real[..real.len() - 1]);
    for n in 0..5000u64 {
        let id = match n % 3 {
            0 => json!(forged),
            1 => json!(n),
            _ => json!(format!("toolhost-ask-0-{n}")),
        };
        client
            .send(&respond(
                &id,
                &json!({"action": "accept", "content": {"name": "Mallory"}}),
            ))
            .await;
    }
    client.send(&call_line(2, "look", &json!({}))).await;
    // Nothing answers the flood: the next message is the answer to call 2.
    assert_eq!(
        outcome(&client.next_json().await),
        ("looked".to_owned(), false)
    );
    client
        .send(&respond(
            &id,
            &json!({"action": "accept", "content": {"name": "Ada"}}),
        ))
        .await;
    let answer = client.next_json().await;
    assert_eq!(answer["id"], 1);
    assert_eq!(
        outcome(&answer),
        ("got {\"name\":\"Ada\"}".to_owned(), false)
    );
}

#[tokio::test]
async fn the_conformance_suites_default_and_enum_questions_go_out_as_asked_and_their_answers_are_taken(
) {
    let (registry, _) = asking_registry();
    let mut client = ready(McpServer::new(registry), true).await;
    // elicitation-sep1034-defaults and elicitation-sep1330-enums, with the answers the
    // suite's client gives.
    let defaults = json!({"type": "object", "properties": {
        "name": {"type": "string", "default": "John Doe"},
        "age": {"type": "integer", "default": 30},
        "score": {"type": "number", "default": 95.5},
        "status": {"type": "string", "enum": ["active", "inactive", "pending"], "default": "active"},
        "verified": {"type": "boolean", "default": true},
    }});
    let enums = json!({"type": "object", "properties": {
        "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
        "titledSingle": {"type": "string", "oneOf": [{"const": "value1", "title": "First Option"}, {"const": "value2", "title": "Second Option"}]},
        "legacyEnum": {"type": "string", "enum": ["opt1", "opt2", "opt3"], "enumNames": ["Option One", "Option Two", "Option Three"]},
        "untitledMulti": {"type": "array", "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
        "titledMulti": {"type": "array", "items": {"anyOf": [{"const": "value1", "title": "First Choice"}, {"const": "value2", "title": "Second Choice"}]}},
    }});
    let cases = [
        (
            defaults,
            json!({"name": "Jane Smith", "age": 25, "score": 88, "status": "inactive", "verified": false}),
        ),
        (
            enums,
            json!({"untitledSingle": "option1", "titledSingle": "value1", "legacyEnum": "opt1", "untitledMulti": ["option1", "option2"], "titledMulti": ["value1", "value2"]}),
        ),
    ];
    for (id, (schema, content)) in (1..).zip(cases) {
        client
            .send(&call_line(id, "ask_schema", &json!({"schema": schema})))
            .await;
        let question = client.next_json().await;
        assert_eq!(question["params"]["requestedSchema"], schema);
        client
            .send(&respond(
                &question["id"],
                &json!({"action": "accept", "content": content}),
            ))
            .await;
        assert_eq!(
            outcome(&client.next_json().await),
            (format!("Elicitation completed: content={content}"), false)
        );
    }
}

#[tokio::test]
async fn an_answer_over_the_size_cap_is_refused_unread() {
    let (registry, _) = asking_registry();
    let mut client = ready(McpServer::new(registry), true).await;
    client.send(&call_line(1, "ask_name", &json!({}))).await;
    let id = client.next_json().await["id"].clone();
    let padding = "p".repeat(crate::elicit::MAX_ANSWER_BYTES);
    client
        .send(&respond(
            &id,
            &json!({"action": "accept", "content": {"name": "Ada"}, "_meta": {"padding": padding}}),
        ))
        .await;
    // The result as sent: the padding and 67 bytes of the rest.
    assert_eq!(
        outcome(&client.next_json().await),
        (
            "ask_name: invalid: the answer is 65603 bytes, over the 65536-byte limit for one answer; it was not read".to_owned(),
            true
        )
    );
}

#[tokio::test]
async fn a_call_has_one_question_open_at_a_time() {
    let (registry, _) = asking_registry();
    let mut client = ready(McpServer::new(registry), true).await;
    client.send(&call_line(1, "ask_twice", &json!({}))).await;
    let question = client.next_json().await;
    assert_eq!(question["params"]["message"], "First?");
    client
        .send(&respond(&question["id"], &json!({"action": "accept"})))
        .await;
    assert_eq!(
        outcome(&client.next_json().await),
        ("Ok(true) / Err(Invalid(\"this call already has a question open: ask one at a time, waiting for each answer\"))".to_owned(), false)
    );
}

#[tokio::test]
async fn an_answer_reaches_its_call_while_the_call_queue_is_full() {
    // One call runs (it asks), one waits in the queue, a third has no room: the reader
    // waits for room, and must still read the answer and a cancellation, or the call
    // that asks holds its place until the confirm timeout.
    let (registry, _) = asking_registry();
    let server = McpServer::new(registry)
        .with_max_in_flight(NonZeroUsize::new(1).unwrap())
        .with_max_queued_calls(NonZeroUsize::new(1).unwrap())
        .with_confirm_timeout(Duration::from_secs(60));
    let mut client = ready(server, true).await;
    client.send(&call_line(1, "ask_name", &json!({}))).await;
    let question = client.next_json().await;
    assert_eq!(question["method"], "elicitation/create");
    client.send(&call_line(2, "look", &json!({}))).await;
    client.send(&call_line(3, "look", &json!({}))).await;
    // Read while the reader waits for room: a cancellation of the queued call 2 and a
    // request (held until there is room), then the answer.
    client
        .send(
            &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": 2}})
            .to_string(),
        )
        .await;
    client
        .send(&respond(
            &question["id"],
            &json!({"action": "accept", "content": {"name": "Ada"}}),
        ))
        .await;
    let started = std::time::Instant::now();
    let answer = client.next_json().await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(answer["id"], 1);
    assert_eq!(
        outcome(&answer),
        ("got {\"name\":\"Ada\"}".to_owned(), false)
    );
    // Call 2 was cancelled while it waited: never answered. Call 3 runs.
    let answer = client.next_json().await;
    assert_eq!(answer["id"], 3);
    assert_eq!(outcome(&answer), ("looked".to_owned(), false));
    client
        .send(&json!({"jsonrpc": "2.0", "id": 4, "method": "ping"}).to_string())
        .await;
    assert_eq!(client.next_json().await["id"], 4);
}

mod approval;
mod modern;
