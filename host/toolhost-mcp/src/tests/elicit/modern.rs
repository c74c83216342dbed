//! The 2026-07-28 revision: questions as `input_required` results and the client's
//! repeated call.

use super::*;

/// A 2026-07-28 `tools/call` (no `initialize`) whose client does (or not) declare
/// elicitation, with `inputResponses` and `requestState` when given.
fn modern_call(
    id: u64,
    tool: &str,
    arguments: &Value,
    elicitation: bool,
    input: Option<(&Value, &Value)>,
) -> String {
    let capabilities = if elicitation {
        json!({"elicitation": {}})
    } else {
        json!({})
    };
    let mut params = json!({"name": tool, "arguments": arguments, "_meta": {
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
async fn modern_approval_goes_through_input_required_and_only_an_accept_runs_the_call() {
    let (registry, ran) = asking_registry();
    let server =
        McpServer::new(registry).with_approval(ApprovalPolicy::new().confirm_tool("erase"));
    let (mut client, _serving) = serve_client(server);
    let arguments = json!({"path": "a"});
    client
        .send(&modern_call(1, "erase", &arguments, true, None))
        .await;
    let first = client.next_json().await;
    assert_eq!(first["id"], 1);
    let result = &first["result"];
    assert_eq!(result["resultType"], "input_required", "{first}");
    let question = &result["inputRequests"]["q0"];
    assert_eq!(question["method"], "elicitation/create");
    assert_eq!(question["params"]["mode"], "form");
    assert_eq!(
        question["params"]["message"],
        "Allow the tool \"erase\" to run?\nArguments: {\"path\":\"a\"}"
    );
    let state = result["requestState"].clone();
    assert!(!ran.0.load(Ordering::SeqCst));

    // Declined: not run.
    let declined = json!({"q0": {"action": "decline"}});
    client
        .send(&modern_call(
            2,
            "erase",
            &arguments,
            true,
            Some((&declined, &state)),
        ))
        .await;
    let answer = client.next_json().await;
    assert_eq!(answer["result"]["resultType"], "complete");
    let (text, error) = outcome(&answer);
    assert!(error && text.contains("the user declined"), "{text}");
    assert!(!ran.0.load(Ordering::SeqCst));

    // The approval given for these arguments does not carry to others: asked again.
    let accepted = json!({"q0": {"action": "accept"}});
    client
        .send(&modern_call(
            3,
            "erase",
            &json!({"path": "/"}),
            true,
            Some((&accepted, &state)),
        ))
        .await;
    assert_eq!(
        client.next_json().await["result"]["resultType"],
        "input_required"
    );
    // Responses without the server's state (or with a forged one) are not read either.
    for forged in [json!("0000000000000000.W10"), json!("")] {
        client
            .send(&modern_call(
                4,
                "erase",
                &arguments,
                true,
                Some((&accepted, &forged)),
            ))
            .await;
        assert_eq!(
            client.next_json().await["result"]["resultType"],
            "input_required"
        );
    }
    assert!(
        !ran.0.load(Ordering::SeqCst),
        "no forged approval may run the tool"
    );

    // Accepted with its own state: it runs.
    client
        .send(&modern_call(
            5,
            "erase",
            &arguments,
            true,
            Some((&accepted, &state)),
        ))
        .await;
    let answer = client.next_json().await;
    assert_eq!(outcome(&answer), ("erased".to_owned(), false));
    assert!(ran.0.load(Ordering::SeqCst));
}

#[tokio::test]
async fn modern_questions_are_checked_and_a_client_without_the_capability_is_refused() {
    let (registry, ran) = asking_registry();
    let server =
        McpServer::new(registry).with_approval(ApprovalPolicy::new().confirm_tool("erase"));
    let (mut client, _serving) = serve_client(server);
    // No elicitation in this request's capabilities: refused, never asked.
    client
        .send(&modern_call(1, "erase", &json!({}), false, None))
        .await;
    let (text, error) = outcome(&client.next_json().await);
    assert!(
        error && text.contains("this client cannot ask its user"),
        "{text}"
    );
    assert!(!ran.0.load(Ordering::SeqCst));
    // A tool's own question, answered with a value its schema refuses.
    client
        .send(&modern_call(2, "ask_name", &json!({}), true, None))
        .await;
    let first = client.next_json().await;
    let state = first["result"]["requestState"].clone();
    assert_eq!(
        first["result"]["inputRequests"]["q0"]["params"]["requestedSchema"]["required"],
        json!(["name"])
    );
    let bad = json!({"q0": {"action": "accept", "content": {"name": "x".repeat(21)}}});
    client
        .send(&modern_call(
            3,
            "ask_name",
            &json!({}),
            true,
            Some((&bad, &state)),
        ))
        .await;
    let (text, error) = outcome(&client.next_json().await);
    assert!(error && text.contains("invalid: the answer does not match the question's schema: \"name\" 21 characters is outside the allowed length"), "{text}");
    let good = json!({"q0": {"action": "accept", "content": {"name": "Ada"}}});
    client
        .send(&modern_call(
            4,
            "ask_name",
            &json!({}),
            true,
            Some((&good, &state)),
        ))
        .await;
    assert_eq!(
        outcome(&client.next_json().await),
        ("got {\"name\":\"Ada\"}".to_owned(), false)
    );
}
