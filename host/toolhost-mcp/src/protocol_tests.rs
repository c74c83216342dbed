//! The protocol as a client sees it, through the whole server: both eras, discovery,
//! pagination, parse errors, batches, progress, log lines, tool list changes.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, Lines, WriteHalf};

use toolhost::registry::{
    Arguments, CallContext, Environment, Handler, Registry, ToolDefinition, ToolResult,
};

use super::{McpServer, Revision};

const MODERN: &str = "2026-07-28";

fn meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    })
}

fn registry(tools: usize) -> Arc<Registry> {
    let registry = Registry::new();
    for i in 0..tools {
        registry
            .register(
                ToolDefinition::new(format!("t{i}"), "A tool.", json!({"type": "object"})),
                move |_ctx: CallContext, _args: Arguments, _env: Environment| async move {
                    Ok(ToolResult::new(format!("t{i}")))
                },
            )
            .unwrap();
    }
    registry
        .register(
            ToolDefinition::new("steps", "Reports progress.", json!({"type": "object"})),
            |ctx: CallContext, _args: Arguments, _env: Environment| async move {
                for done in 1..=3 {
                    ctx.report_progress(done, Some(3), || Some(format!("step {done}")));
                    // Past the interval, so each report goes out.
                    tokio::time::sleep(Duration::from_millis(120)).await;
                }
                Ok(ToolResult::new("done"))
            },
        )
        .unwrap();
    registry
        .register(
            ToolDefinition::new("chatty", "Logs.", json!({"type": "object"})),
            |_ctx: CallContext, _args: Arguments, _env: Environment| async move {
                tracing::debug!(target: "plugin", "a detail");
                tracing::warn!(target: "plugin", plugin = "chatty", "careful");
                Ok(ToolResult::new("said"))
            },
        )
        .unwrap();
    Arc::new(registry)
}

/// A client talking to a server over an in-memory pipe.
struct Client {
    write: WriteHalf<DuplexStream>,
    read: Lines<BufReader<tokio::io::ReadHalf<DuplexStream>>>,
    server: tokio::task::JoinHandle<()>,
}

impl Client {
    fn start(server: McpServer) -> Self {
        let (client, server_end) = tokio::io::duplex(1 << 20);
        let (server_read, server_write) = tokio::io::split(server_end);
        let server = tokio::spawn(async move {
            server.serve(server_read, server_write).await.unwrap();
        });
        let (read, write) = tokio::io::split(client);
        Self {
            write,
            read: BufReader::new(read).lines(),
            server,
        }
    }

    async fn send_line(&mut self, line: &str) {
        self.write.write_all(line.as_bytes()).await.unwrap();
        self.write.write_all(b"\n").await.unwrap();
    }

    async fn send(&mut self, message: Value) {
        self.send_line(&message.to_string()).await;
    }

    async fn receive(&mut self) -> Value {
        let line = tokio::time::timeout(Duration::from_secs(10), self.read.next_line())
            .await
            .expect("an answer within 10 s")
            .unwrap()
            .expect("a line");
        serde_json::from_str(&line).unwrap()
    }

    /// Nothing arrives within `wait`.
    async fn silent(&mut self, wait: Duration) {
        if let Ok(line) = tokio::time::timeout(wait, self.read.next_line()).await {
            panic!("expected nothing, got {line:?}");
        }
    }

    async fn request(&mut self, id: u64, method: &str, params: Value) -> Value {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        self.receive().await
    }

    async fn initialize(&mut self, version: &str) {
        let init = self
            .request(
                0,
                "initialize",
                json!({"protocolVersion": version, "capabilities": {}}),
            )
            .await;
        assert_eq!(init["result"]["protocolVersion"], version);
        self.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
    }

    /// Closes the input and returns what came after, once the server stopped.
    async fn finish(mut self) -> Vec<Value> {
        self.write.shutdown().await.unwrap();
        drop(self.write);
        let mut rest = Vec::new();
        while let Ok(Some(line)) = self.read.next_line().await {
            rest.push(serde_json::from_str(&line).unwrap());
        }
        self.server.await.unwrap();
        rest
    }
}

#[tokio::test]
async fn a_modern_only_client_discovers_lists_and_calls() {
    let mut client = Client::start(McpServer::new(registry(2)));
    // The stdio probe a dual-era client sends first.
    let discover = client
        .request(1, "server/discover", json!({"_meta": meta()}))
        .await;
    assert_eq!(
        discover,
        json!({"jsonrpc": "2.0", "id": 1, "result": {
            "resultType": "complete",
            "supportedVersions": ["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"],
            "capabilities": {"tools": {"listChanged": false}, "logging": {}},
            "ttlMs": 300000,
            "cacheScope": "public",
            "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "wasm-toolhost", "version": env!("CARGO_PKG_VERSION")}},
        }})
    );
    let list = client
        .request(2, "tools/list", json!({"_meta": meta()}))
        .await;
    let result = &list["result"];
    assert_eq!(result["resultType"], "complete");
    assert_eq!(
        (result["ttlMs"].clone(), result["cacheScope"].clone()),
        (json!(300000), json!("public"))
    );
    assert_eq!(result["tools"].as_array().unwrap().len(), 4);
    assert!(result.get("nextCursor").is_none(), "{result}");
    assert_eq!(
        result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "wasm-toolhost"
    );
    let call = client
        .request(
            3,
            "tools/call",
            json!({"name": "t1", "arguments": {}, "_meta": meta()}),
        )
        .await;
    assert_eq!(
        call["result"],
        json!({"resultType": "complete", "content": [{"type": "text", "text": "t1"}], "isError": false,
            "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "wasm-toolhost", "version": env!("CARGO_PKG_VERSION")}}})
    );
    // The legacy-only methods are gone in this era; a legacy request on the same
    // connection is still served the legacy way.
    for (id, method) in [(4, "initialize"), (5, "ping"), (6, "logging/setLevel")] {
        let error = client.request(id, method, json!({"_meta": meta()})).await;
        assert_eq!(error["error"]["code"], -32601, "{method}: {error}");
        assert_eq!(error["id"], id);
    }
    assert_eq!(
        client.request(7, "ping", json!({})).await["result"],
        json!({})
    );
    assert!(client.finish().await.is_empty());
}

#[tokio::test]
async fn bad_envelopes_get_the_modern_errors() {
    let mut client = Client::start(McpServer::new(registry(0)));
    let error = client.request(101, "server/discover", json!({})).await;
    assert_eq!(
        (error["id"].clone(), error["error"]["code"].clone()),
        (json!(101), json!(-32602))
    );
    let mut no_caps = meta();
    no_caps
        .as_object_mut()
        .unwrap()
        .remove("io.modelcontextprotocol/clientCapabilities");
    let error = client
        .request(104, "tools/list", json!({"_meta": no_caps}))
        .await;
    assert_eq!(error["error"]["code"], -32602);
    let mut other = meta();
    other["io.modelcontextprotocol/protocolVersion"] = json!("v999.0.0");
    let error = client
        .request(301, "server/discover", json!({"_meta": other}))
        .await;
    assert_eq!(
        error["error"]["data"],
        json!({"supported": ["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"], "requested": "v999.0.0"})
    );
    assert_eq!(
        (error["id"].clone(), error["error"]["code"].clone()),
        (json!(301), json!(-32022))
    );
    let mut no_info = meta();
    no_info
        .as_object_mut()
        .unwrap()
        .remove("io.modelcontextprotocol/clientInfo");
    let ok = client
        .request(105, "server/discover", json!({"_meta": no_info}))
        .await;
    assert_eq!(ok["result"]["resultType"], "complete");
    client.finish().await;
}

#[tokio::test]
async fn tools_list_pages_with_an_opaque_cursor() {
    let mut client = Client::start(McpServer::new(registry(5)).with_page_size(2));
    client.initialize("2025-06-18").await;
    let mut names = Vec::new();
    let mut cursor: Option<Value> = None;
    for id in 1.. {
        let params = match &cursor {
            Some(cursor) => json!({"cursor": cursor}),
            None => json!({}),
        };
        let page = client.request(id, "tools/list", params).await;
        let tools = page["result"]["tools"].as_array().unwrap();
        assert!(tools.len() <= 2, "{page}");
        names.extend(tools.iter().map(|t| t["name"].as_str().unwrap().to_owned()));
        match page["result"].get("nextCursor") {
            Some(next) => cursor = Some(next.clone()),
            None => break,
        }
        assert!(id < 10, "pages never end");
    }
    assert_eq!(names, ["t0", "t1", "t2", "t3", "t4", "steps", "chatty"]);
    for (id, cursor) in [
        (20, json!("garbage")),
        (21, json!("")),
        (22, json!(3)),
        (23, json!({"page": 2})),
    ] {
        let error = client
            .request(id, "tools/list", json!({"cursor": cursor}))
            .await;
        assert_eq!(
            (error["id"].clone(), error["error"]["code"].clone()),
            (json!(id), json!(-32602)),
            "{cursor}: {error}"
        );
    }
    client.finish().await;
}

#[tokio::test]
async fn parse_errors_give_a_null_id_only_where_the_revision_allows_it() {
    // Before any initialize (and for modern clients): no id member at all.
    let mut client = Client::start(McpServer::new(registry(0)));
    client.send_line("{not json").await;
    let error = client.receive().await;
    assert_eq!(error["error"]["code"], -32700);
    assert!(error.get("id").is_none(), "{error}");
    client.finish().await;

    for (version, null) in [
        ("2024-11-05", true),
        ("2025-03-26", true),
        ("2025-06-18", true),
        ("2025-11-25", false),
    ] {
        let mut client = Client::start(McpServer::new(registry(0)));
        client.initialize(version).await;
        client.send_line("{not json").await;
        let error = client.receive().await;
        assert_eq!(error["error"]["code"], -32700, "{version}");
        assert_eq!(
            error.get("id") == Some(&Value::Null),
            null,
            "{version}: {error}"
        );
        assert_eq!(error.get("id").is_none(), !null, "{version}: {error}");
        client.finish().await;
    }
}

#[tokio::test]
async fn batches_only_in_2025_03_26() {
    let batch = json!([
        {"jsonrpc": "2.0", "id": 1, "method": "ping"},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "t0"}},
        {"jsonrpc": "2.0", "id": 3, "method": "nope"},
        7,
    ]);
    for version in ["2024-11-05", "2025-06-18", "2025-11-25"] {
        let mut client = Client::start(McpServer::new(registry(1)));
        client.initialize(version).await;
        client.send(batch.clone()).await;
        let error = client.receive().await;
        assert_eq!(error["error"]["code"], -32600, "{version}: {error}");
        assert!(
            error["error"]["message"]
                .as_str()
                .unwrap()
                .contains("2025-03-26"),
            "{error}"
        );
        client.finish().await;
    }
    let mut client = Client::start(McpServer::new(registry(1)));
    client.initialize("2025-03-26").await;
    client.send(batch).await;
    let mut answers = client.receive().await.as_array().unwrap().clone();
    answers.sort_by_key(|answer| answer["id"].as_i64().unwrap_or(-1));
    assert_eq!(answers.len(), 4, "{answers:?}");
    assert_eq!(answers[0]["error"]["code"], -32600); // the 7
    assert_eq!(answers[1], json!({"jsonrpc": "2.0", "id": 1, "result": {}}));
    assert_eq!(answers[2]["result"]["content"][0]["text"], "t0");
    assert_eq!(answers[3]["error"]["code"], -32601);
    // Notifications only: no answer at all; then single messages still work.
    client
        .send(json!([{"jsonrpc": "2.0", "method": "notifications/initialized"}]))
        .await;
    client.send_line("[]").await;
    let error = client.receive().await;
    assert_eq!(error["error"]["code"], -32600);
    assert_eq!(error["id"], Value::Null, "2025-03-26 gives null ids");
    assert_eq!(
        client.request(9, "ping", json!({})).await["result"],
        json!({})
    );
    client.finish().await;
}

#[tokio::test]
async fn progress_reaches_a_client_that_asked_and_only_it() {
    let mut client = Client::start(McpServer::new(registry(0)));
    client.initialize("2025-11-25").await;
    client
        .send(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "steps", "_meta": {"progressToken": "tok"}}}))
        .await;
    let mut notes = Vec::new();
    let answer = loop {
        let message = client.receive().await;
        if message.get("id").is_some() {
            break message;
        }
        notes.push(message);
    };
    assert_eq!(answer["result"]["content"][0]["text"], "done");
    assert_eq!(
        notes,
        (1..=3)
            .map(|done| json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {
                "progressToken": "tok", "progress": f64::from(done), "total": 3.0, "message": format!("step {done}")}}))
            .collect::<Vec<_>>()
    );
    // Without a token: the answer alone.
    let answer = client
        .request(2, "tools/call", json!({"name": "steps"}))
        .await;
    assert_eq!(answer["id"], 2);
    client.finish().await;
}

#[tokio::test]
async fn log_lines_follow_the_level_the_client_set() {
    use tracing_subscriber::layer::SubscriberExt;
    // Current-thread runtime: the calls run on this thread, under this subscriber.
    let _default =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(super::log_layer()));
    let mut client = Client::start(McpServer::new(registry(0)));
    client.initialize("2025-06-18").await;
    // No level set: no log lines.
    assert_eq!(
        client
            .request(1, "tools/call", json!({"name": "chatty"}))
            .await["id"],
        1
    );
    let error = client
        .request(2, "logging/setLevel", json!({"level": "loud"}))
        .await;
    assert_eq!(error["error"]["code"], -32602);
    assert_eq!(
        client
            .request(3, "logging/setLevel", json!({"level": "warning"}))
            .await["result"],
        json!({})
    );
    let note = client
        .request(4, "tools/call", json!({"name": "chatty"}))
        .await;
    assert_eq!(
        note,
        json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {
            "level": "warning", "logger": "plugin", "data": {"message": "careful", "plugin": "chatty"}}})
    );
    assert_eq!(client.receive().await["id"], 4);

    // Modern: only a request that asks, at its level.
    let answer = client
        .request(5, "tools/call", json!({"name": "chatty", "_meta": meta()}))
        .await;
    assert_eq!(answer["id"], 5, "no log line without logLevel: {answer}");
    let mut asking = meta();
    asking["io.modelcontextprotocol/logLevel"] = json!("debug");
    client
        .send(json!({"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {"name": "chatty", "_meta": asking}}))
        .await;
    let mut notes = Vec::new();
    loop {
        let message = client.receive().await;
        if message.get("id").is_some() {
            assert_eq!(message["id"], 6);
            break;
        }
        assert_eq!(message["method"], "notifications/message", "{message}");
        notes.push((
            message["params"]["logger"].clone(),
            message["params"]["level"].clone(),
        ));
    }
    // The plugin's lines at both levels, and the host's own line about the call (at
    // debug: a call that succeeds is logged at debug, the audit log records them all).
    assert_eq!(
        notes[..2],
        [
            (json!("plugin"), json!("debug")),
            (json!("plugin"), json!("warning"))
        ]
    );
    assert!(
        notes[2..].contains(&(json!("toolhost_mcp::session"), json!("debug"))),
        "{notes:?}"
    );
    client.finish().await;
}

fn extra_tool(name: &str) -> (ToolDefinition, Arc<dyn Handler>) {
    let handler = |_ctx: CallContext, _args: Arguments, _env: Environment| async move {
        Ok(ToolResult::new("extra"))
    };
    (
        ToolDefinition::new(name, "Added later.", json!({"type": "object"})),
        Arc::new(handler),
    )
}

#[tokio::test]
async fn list_changes_are_announced_when_watching() {
    let registry = registry(1);
    let mut client = Client::start(McpServer::new(Arc::clone(&registry)).with_list_changed(true));
    let init = client
        .request(
            0,
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {}}),
        )
        .await;
    assert_eq!(init["result"]["capabilities"]["tools"]["listChanged"], true);
    registry.register_all(vec![extra_tool("x1")]).unwrap();
    assert_eq!(
        client.receive().await,
        json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
    );
    let list = client.request(1, "tools/list", json!({})).await;
    assert_eq!(list["result"]["tools"].as_array().unwrap().len(), 4);
    registry.replace_all(&["x1".into()], Vec::new()).unwrap();
    client.receive().await;
    assert_eq!(
        client.request(2, "tools/list", json!({})).await["result"]["tools"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
    client.finish().await;

    // Not watching: nothing announced.
    let mut client = Client::start(McpServer::new(Arc::clone(&registry)));
    client.initialize("2025-06-18").await;
    registry.register_all(vec![extra_tool("x2")]).unwrap();
    client.silent(Duration::from_millis(200)).await;
    client.finish().await;
}

#[tokio::test]
async fn a_modern_subscription_is_acknowledged_tagged_and_closed() {
    let registry = registry(0);
    let mut client = Client::start(McpServer::new(Arc::clone(&registry)).with_list_changed(true));
    client
        .send(json!({"jsonrpc": "2.0", "id": "sub", "method": "subscriptions/listen",
            "params": {"_meta": meta(), "notifications": {"toolsListChanged": true, "promptsListChanged": true}}}))
        .await;
    // A watching server may gain prompts (plugins' catalog): their changes are offered
    // too, and acknowledged.
    assert_eq!(
        client.receive().await,
        json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged", "params": {
            "_meta": {"io.modelcontextprotocol/subscriptionId": "sub"},
            "notifications": {"toolsListChanged": true, "promptsListChanged": true}}})
    );
    registry.register_all(vec![extra_tool("x1")]).unwrap();
    assert_eq!(
        client.receive().await,
        json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed",
            "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": "sub"}}})
    );
    // A modern client is not sent the legacy (untagged) notification: nothing else came.
    let rest = client.finish().await;
    assert_eq!(rest.len(), 1, "{rest:?}");
    assert_eq!(rest[0]["id"], "sub");
    assert_eq!(rest[0]["result"]["resultType"], "complete");
    assert_eq!(
        rest[0]["result"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "sub"
    );
}

#[tokio::test]
async fn a_cancelled_subscription_is_not_answered() {
    let mut client = Client::start(McpServer::new(registry(0)));
    client
        .send(
            json!({"jsonrpc": "2.0", "id": 5, "method": "subscriptions/listen",
            "params": {"_meta": meta(), "notifications": {"toolsListChanged": true}}}),
        )
        .await;
    // Not watching: the filter is acknowledged without what cannot be offered.
    let ack = client.receive().await;
    assert_eq!(ack["params"]["notifications"], json!({}));
    client
        .send(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 5}}))
        .await;
    assert_eq!(
        client
            .request(6, "tools/list", json!({"_meta": meta()}))
            .await["id"],
        6
    );
    assert!(client.finish().await.is_empty());
}

#[tokio::test]
async fn open_subscriptions_are_capped_per_connection() {
    let mut client = Client::start(McpServer::new(registry(0)).with_list_changed(true));
    let listen = |id: usize| {
        json!({"jsonrpc": "2.0", "id": id, "method": "subscriptions/listen",
            "params": {"_meta": meta(), "notifications": {"toolsListChanged": true}}})
    };
    for id in 0..crate::limits::MAX_SUBSCRIPTIONS {
        client.send(listen(id)).await;
        let ack = client.receive().await;
        assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    }
    client.send(listen(99)).await;
    let refused = client.receive().await;
    assert_eq!(
        (refused["id"].clone(), refused["error"]["code"].clone()),
        (json!(99), json!(-32602))
    );
    // Cancelling one frees its place.
    client
        .send(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 0}}))
        .await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    client.send(listen(100)).await;
    assert_eq!(
        client.receive().await["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        100
    );
    // At the end every open one is closed with its result.
    let rest = client.finish().await;
    assert_eq!(rest.len(), crate::limits::MAX_SUBSCRIPTIONS, "{rest:?}");
    assert!(rest.iter().all(|m| m["result"]["resultType"] == "complete"));
}

#[test]
fn revisions_listed_match() {
    assert_eq!(
        Revision::ALL.len(),
        super::SUPPORTED_PROTOCOL_VERSIONS.len()
    );
}
