//! The serving loop end to end over in-memory pipes.

use super::*;
use serde_json::{json, Value};
use toolhost::registry::CallContext;

fn registry() -> Arc<Registry> {
    use toolhost::registry::{Arguments, ToolDefinition, ToolError, ToolResult};
    use toolhost_sdk::schema::{object, string};
    let registry = Registry::new();
    registry
        .register(
            ToolDefinition::new(
                "greet",
                "Greet someone.",
                object([("name", string("Who."))], ["name"]),
            ),
            |_ctx: CallContext, args: Arguments, _env: Environment| async move {
                Ok(ToolResult::new(format!(
                    "Hello, {}!",
                    args.required_str("name")?
                )))
            },
        )
        .unwrap();
    registry
        .register(
            ToolDefinition::new("turn", "Echo the environment.", json!({"type": "object"})),
            |_ctx: CallContext, _args: Arguments, env: Environment| async move {
                Ok(ToolResult::new(
                    json!({"session": env.session_id, "turn": env.turn_id}),
                ))
            },
        )
        .unwrap();
    registry
        .register(
            ToolDefinition::new("sleep", "Wait until cancelled.", json!({"type": "object"})),
            |ctx: CallContext, _args: Arguments, _env: Environment| async move {
                ctx.cancellation().cancelled().await;
                Err::<ToolResult, _>(ToolError::failed("cancelled"))
            },
        )
        .unwrap();
    Arc::new(registry)
}

async fn exchange(input: &str) -> Vec<Value> {
    let server = McpServer::new(registry()).with_session(Environment {
        session_id: "s-1".into(),
        turn_id: String::new(),
    });
    let mut output = Vec::new();
    server.serve(input.as_bytes(), &mut output).await.unwrap();
    String::from_utf8(output)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

#[tokio::test]
async fn answers_each_request_and_keeps_serving() {
    let out = exchange(concat!(
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-11-05"}}"#, "\n",
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#, "\n",
        "garbage\n",
        r#"{"jsonrpc":"2.0","id":2,"method":"nope"}"#, "\n",
        r#"{"jsonrpc":"2.0","method":"notifications/whatever"}"#, "\n",
        r#"{"jsonrpc":"2.0","id":3,"method":"ping"}"#, "\n",
    ))
    .await;
    assert_eq!(out.len(), 4, "{out:?}");
    assert_eq!(out[0]["result"]["protocolVersion"], "2024-11-05");
    assert_eq!(out[1]["id"], Value::Null);
    assert_eq!(out[1]["error"]["code"], -32700);
    assert_eq!(
        out[2],
        json!({"jsonrpc":"2.0","id":2,"error":{"code":-32601,
            "message":"Method not found: nope; this server answers initialize, ping, tools/list, tools/call, logging/setLevel"}})
    );
    assert_eq!(out[3], json!({"jsonrpc":"2.0","id":3,"result":{}}));
}

#[tokio::test]
async fn tool_calls_and_errors_as_results() {
    let mut out = exchange(concat!(
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"greet","arguments":{"name":"Ada"}}}"#, "\n",
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"greet","arguments":{}}}"#, "\n",
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"missing"}}"#, "\n",
        r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"greet","arguments":[1]}}"#, "\n",
        r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{}}"#, "\n",
    ))
    .await;
    out.sort_by_key(|m| m["id"].as_i64());
    let text = |m: &Value| {
        (
            m["result"]["content"][0]["text"]
                .as_str()
                .unwrap()
                .to_owned(),
            m["result"]["isError"].clone(),
        )
    };
    assert_eq!(text(&out[0]), ("Hello, Ada!".into(), json!(false)));
    assert_eq!(text(&out[1]).1, json!(true));
    assert!(
        text(&out[1]).0.starts_with("greet: "),
        "{}",
        text(&out[1]).0
    );
    assert_eq!(
        text(&out[2]),
        ("unknown tool \"missing\": no tool of that name is registered; call one of the tools you were offered".into(), json!(true))
    );
    assert_eq!(text(&out[3]).1, json!(true));
    assert_eq!(out[4]["error"]["code"], -32602);
}

#[tokio::test]
async fn fresh_turn_per_call_same_session() {
    let out = exchange(concat!(
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"turn"}}"#,
        "\n",
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"turn"}}"#,
        "\n",
    ))
    .await;
    let envs: Vec<Value> = out
        .iter()
        .map(|m| serde_json::from_str(m["result"]["content"][0]["text"].as_str().unwrap()).unwrap())
        .collect();
    assert_eq!(
        (envs[0]["session"].clone(), envs[1]["session"].clone()),
        (json!("s-1"), json!("s-1"))
    );
    assert_ne!(envs[0]["turn"], envs[1]["turn"]);
    assert_eq!(envs[0]["turn"].as_str().unwrap().len(), 36);
}

#[tokio::test]
async fn cancelled_call_is_stopped_and_not_answered() {
    let out = exchange(concat!(
        r#"{"jsonrpc":"2.0","id":"slow","method":"tools/call","params":{"name":"sleep"}}"#, "\n",
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"slow","reason":"user"}}"#, "\n",
        r#"{"jsonrpc":"2.0","id":9,"method":"ping"}"#, "\n",
    ))
    .await;
    assert_eq!(out, [json!({"jsonrpc":"2.0","id":9,"result":{}})]);
}

#[tokio::test]
async fn write_failure_is_an_error() {
    struct Broken;
    impl AsyncWrite for Broken {
        fn poll_write(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            _: &[u8],
        ) -> std::task::Poll<std::io::Result<usize>> {
            std::task::Poll::Ready(Err(std::io::ErrorKind::BrokenPipe.into()))
        }
        fn poll_flush(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            std::task::Poll::Ready(Ok(()))
        }
        fn poll_shutdown(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            std::task::Poll::Ready(Ok(()))
        }
    }
    let server = McpServer::new(registry());
    let err = server
        .serve(
            &b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n"[..],
            Broken,
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, ServeError::Write(ref e) if e.kind() == std::io::ErrorKind::BrokenPipe),
        "{err:?}"
    );
}
