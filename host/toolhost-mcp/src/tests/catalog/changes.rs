//! Subscriptions to files and to sources' resources, and the announcements of
//! catalog changes.

use super::*;
use crate::limits::MAX_RESOURCE_SUBSCRIPTIONS;

/// A server with `--watch` over a memory root holding `a.md`.
fn watched() -> (Arc<MemoryStorage>, McpServer) {
    let (storage, files) = memory_files(&["a.md", "b.md"]);
    let server = McpServer::new(Arc::new(Registry::new()))
        .with_list_changed(true)
        .with_resources(files);
    (storage, server)
}

#[tokio::test]
async fn a_subscribe_storm_is_refused_past_the_cap() {
    let (_storage, server) = watched();
    let mut requests = vec![request(
        "initialize",
        json!({"protocolVersion": "2025-06-18"}),
    )];
    requests.extend((0..100_000).map(|i| {
        request(
            "resources/subscribe",
            json!({"uri": format!("file:///f{i}.md")}),
        )
    }));
    requests.extend([
        request("resources/subscribe", json!({"uri": "file:///f0.md"})),
        request("resources/unsubscribe", json!({"uri": "file:///never.md"})),
        request("resources/unsubscribe", json!({"uri": "file:///f1.md"})),
        request("resources/subscribe", json!({"uri": "file:///new.md"})),
        request(
            "resources/subscribe",
            json!({"uri": "file:///../etc/passwd"}),
        ),
        request("resources/subscribe", json!({"uri": "plugin://x/y"})),
        request("resources/subscribe", json!({"uri": 5})),
    ]);
    let answers = serve(server, &requests).await;
    assert_eq!(
        answers[0]["result"]["capabilities"]["resources"],
        json!({"listChanged": true, "subscribe": true})
    );
    let storm = &answers[1..=100_000];
    let accepted = storm.iter().filter(|a| a["result"] == json!({})).count();
    assert_eq!(accepted, MAX_RESOURCE_SUBSCRIPTIONS);
    for answer in &storm[MAX_RESOURCE_SUBSCRIPTIONS..] {
        assert_refused(
            answer,
            INVALID_PARAMS,
            &[
                "subscribed to 64 resources already",
                "resources/unsubscribe one first",
            ],
        );
    }
    let rest = &answers[100_001..];
    // Again to one it holds: no more room taken, fine.
    assert_eq!(rest[0]["result"], json!({}));
    assert_eq!(rest[1]["result"], json!({}));
    assert_eq!(rest[2]["result"], json!({}));
    // One dropped: room for one more.
    assert_eq!(rest[3]["result"], json!({}), "{}", rest[3]);
    assert_refused(&rest[4], INVALID_PARAMS, &["\"..\" segment"]);
    assert_refused(&rest[5], INVALID_PARAMS, &["cannot be subscribed to"]);
    assert_refused(&rest[6], INVALID_PARAMS, &["\"uri\" must be a string"]);
}

async fn next_json(client: &mut Client, wait: Duration) -> Option<Value> {
    client
        .answer_within(wait)
        .await
        .map(|line| serde_json::from_str(&line).unwrap())
}

#[tokio::test]
async fn a_changed_file_is_announced_once() {
    let (storage, server) = watched();
    let (mut client, serving) = serve_client(server);
    client
        .send(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}"#)
        .await;
    next_json(&mut client, Duration::from_secs(5))
        .await
        .unwrap();
    client
        .send(r#"{"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{"uri":"file:///a.md"}}"#)
        .await;
    assert_eq!(
        next_json(&mut client, Duration::from_secs(5))
            .await
            .unwrap()["result"],
        json!({})
    );
    // The first poll sees the file as it is; nothing is sent for it.
    assert_eq!(
        next_json(&mut client, Duration::from_millis(1500)).await,
        None
    );
    storage.write("a.md", b"changed", "").unwrap();
    storage.write("b.md", b"not subscribed", "").unwrap();
    let note = next_json(&mut client, Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(
        note,
        json!({"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": "file:///a.md"}})
    );
    // Once per change.
    assert_eq!(
        next_json(&mut client, Duration::from_millis(2500)).await,
        None
    );
    storage.delete("a.md").unwrap();
    let note = next_json(&mut client, Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(note["params"]["uri"], "file:///a.md");
    client
        .send(r#"{"jsonrpc":"2.0","id":3,"method":"resources/unsubscribe","params":{"uri":"file:///a.md"}}"#)
        .await;
    assert_eq!(
        next_json(&mut client, Duration::from_secs(5))
            .await
            .unwrap()["id"],
        3
    );
    storage.write("a.md", b"back", "").unwrap();
    assert_eq!(
        next_json(&mut client, Duration::from_millis(2500)).await,
        None
    );
    drop(client);
    serving.await.unwrap().unwrap();
}

#[tokio::test]
async fn catalog_changes_are_announced() {
    let (registry, _) = registry_with(None, &[]);
    let server = McpServer::new(Arc::clone(&registry)).with_list_changed(true);
    let (mut client, serving) = serve_client(server);
    client
        .send(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}"#)
        .await;
    let init = next_json(&mut client, Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(
        init["result"]["capabilities"],
        json!({"tools": {"listChanged": true}, "logging": {}, "prompts": {"listChanged": true}, "resources": {"listChanged": true, "subscribe": true}, "completions": {}})
    );
    let source: Arc<dyn PromptSource> = Arc::new(Prompts {
        mode: Mode::Good,
        cancelled: Arc::default(),
    });
    registry
        .catalog()
        .replace("greeter", Some(source), None, None)
        .unwrap();
    let note = next_json(&mut client, Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(note["method"], "notifications/prompts/list_changed");
    assert_eq!(
        next_json(&mut client, Duration::from_millis(300)).await,
        None
    );
    let source: Arc<dyn ResourceSource> = Arc::new(Resources {
        namespace: "plugin://a/",
        mode: Mode::Good,
        per_page: 1,
        total: 1,
        cancelled: Arc::default(),
    });
    registry
        .catalog()
        .replace("greeter", None, Some(source), Some("plugin://a/"))
        .unwrap();
    let mut methods = vec![
        next_json(&mut client, Duration::from_secs(5))
            .await
            .unwrap()["method"]
            .clone(),
        next_json(&mut client, Duration::from_secs(5))
            .await
            .unwrap()["method"]
            .clone(),
    ];
    methods.sort_by_key(|m| m.to_string());
    assert_eq!(
        methods,
        [
            json!("notifications/prompts/list_changed"),
            json!("notifications/resources/list_changed")
        ]
    );
    drop(client);
    serving.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_modern_subscription_hears_of_prompt_and_resource_changes() {
    let (registry, _) = registry_with(None, &[]);
    let server = McpServer::new(Arc::clone(&registry)).with_list_changed(true);
    let (mut client, serving) = serve_client(server);
    let listen = json!({"jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen", "params": modern(json!({
        "notifications": {"promptsListChanged": true, "resourcesListChanged": true},
    }))});
    client.send(&listen.to_string()).await;
    let ack = next_json(&mut client, Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    assert_eq!(
        ack["params"]["notifications"],
        json!({"promptsListChanged": true, "resourcesListChanged": true})
    );
    let source: Arc<dyn PromptSource> = Arc::new(Prompts {
        mode: Mode::Good,
        cancelled: Arc::default(),
    });
    registry
        .catalog()
        .replace("greeter", Some(source), None, None)
        .unwrap();
    let mut methods = Vec::new();
    for _ in 0..2 {
        let note = next_json(&mut client, Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!(
            note["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], 1,
            "{note}"
        );
        methods.push(note["method"].as_str().unwrap().to_owned());
    }
    methods.sort();
    assert_eq!(
        methods,
        [
            "notifications/prompts/list_changed",
            "notifications/resources/list_changed"
        ]
    );
    // The input ends: the subscription is answered, as a server closing it does.
    tokio::io::AsyncWriteExt::shutdown(&mut client.input)
        .await
        .unwrap();
    let end = next_json(&mut client, Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(
        (&end["id"], &end["result"]["resultType"]),
        (&json!(1), &json!("complete"))
    );
    serving.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_source_cursor_over_a_kilobyte_is_refused() {
    let (registry, _) = registry_with(None, &[("plugin://long/", Mode::LongCursor, 2, 2)]);
    let answers = serve(
        McpServer::new(registry),
        &[request("resources/list", json!({}))],
    )
    .await;
    assert_refused(
        &answers[0],
        INTERNAL_ERROR,
        &["the resource source of plugin://long/ gave a cursor of 2048 bytes, over the 1024-byte limit"],
    );
}

#[tokio::test]
async fn a_subscribed_resource_of_a_source_is_told_of_when_its_source_changes() {
    let (registry, _) = registry_with(None, &[("plugin://a/", Mode::Good, 1, 1)]);
    // Without --watch and without a root: the source's resources can still be subscribed
    // to (they change only when the catalog does); other URIs cannot.
    let answers = serve(
        McpServer::new(Arc::clone(&registry)),
        &[
            request("initialize", json!({"protocolVersion": "2025-06-18"})),
            request("resources/subscribe", json!({"uri": "plugin://a/r0"})),
            request("resources/subscribe", json!({"uri": "plugin://b/r0"})),
            request("resources/subscribe", json!({"uri": "file:///a.md"})),
            request("resources/unsubscribe", json!({"uri": "plugin://a/r0"})),
        ],
    )
    .await;
    assert_eq!(
        answers[0]["result"]["capabilities"]["resources"],
        json!({"subscribe": true})
    );
    assert_eq!(answers[1]["result"], json!({}));
    for answer in &answers[2..4] {
        assert_refused(answer, INVALID_PARAMS, &["no resource source owns it"]);
    }
    assert_eq!(answers[4]["result"], json!({}));

    // With --watch: a change of the catalog tells each subscribed resource of it.
    let server = McpServer::new(Arc::clone(&registry)).with_list_changed(true);
    let (mut client, serving) = serve_client(server);
    client
        .send(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}"#)
        .await;
    next_json(&mut client, Duration::from_secs(5))
        .await
        .unwrap();
    client
        .send(r#"{"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{"uri":"plugin://a/r0"}}"#)
        .await;
    assert_eq!(
        next_json(&mut client, Duration::from_secs(5))
            .await
            .unwrap()["result"],
        json!({})
    );
    let source: Arc<dyn ResourceSource> = Arc::new(Resources {
        namespace: "plugin://a/",
        mode: Mode::Good,
        per_page: 1,
        total: 2,
        cancelled: Arc::default(),
    });
    registry
        .catalog()
        .replace("owner0", None, Some(source), Some("plugin://a/"))
        .unwrap();
    let mut got = vec![
        next_json(&mut client, Duration::from_secs(5))
            .await
            .unwrap(),
        next_json(&mut client, Duration::from_secs(5))
            .await
            .unwrap(),
    ];
    got.sort_by_key(|note| note["method"].to_string());
    assert_eq!(
        got,
        [
            json!({"jsonrpc": "2.0", "method": "notifications/resources/list_changed"}),
            json!({"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": "plugin://a/r0"}}),
        ]
    );
    drop(client);
    serving.await.unwrap().unwrap();
}

/// A 2026-07-28 `subscriptions/listen` naming resources: the ones `resources/subscribe`
/// would take are acknowledged (a way out of the root, another scheme, a non-existent
/// source are left out), a change of a watched file comes on the stream tagged with the
/// subscription, and an unwatched file's change does not.
#[tokio::test]
async fn a_modern_subscription_watches_the_resources_it_names() {
    let (storage, server) = watched();
    let (mut client, serving) = serve_client(server);
    let discover = json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": modern(json!({}))});
    client.send(&discover.to_string()).await;
    let discovered = next_json(&mut client, Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(
        discovered["result"]["capabilities"]["resources"],
        json!({"listChanged": true, "subscribe": true})
    );
    let listen = json!({"jsonrpc": "2.0", "id": 2, "method": "subscriptions/listen", "params": modern(json!({
        "notifications": {"resourceSubscriptions": [
            "file:///a.md", "file:///../etc/passwd", "file:///a.md", "http://x/", "plugin://none/y", "file:///new.md",
        ]},
    }))});
    client.send(&listen.to_string()).await;
    let ack = next_json(&mut client, Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(
        ack,
        json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged", "params": {
            "_meta": {"io.modelcontextprotocol/subscriptionId": 2},
            "notifications": {"resourceSubscriptions": ["file:///a.md", "file:///new.md"]},
        }})
    );
    // The first poll sees the files as they are.
    assert_eq!(
        next_json(&mut client, Duration::from_millis(1500)).await,
        None
    );
    storage.write("a.md", b"changed", "").unwrap();
    storage.write("b.md", b"not watched", "").unwrap();
    let note = next_json(&mut client, Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(
        note,
        json!({"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {
            "uri": "file:///a.md", "_meta": {"io.modelcontextprotocol/subscriptionId": 2},
        }})
    );
    storage.write("new.md", b"born", "").unwrap();
    let note = next_json(&mut client, Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(note["params"]["uri"], "file:///new.md");
    assert_eq!(
        next_json(&mut client, Duration::from_millis(2500)).await,
        None
    );
    tokio::io::AsyncWriteExt::shutdown(&mut client.input)
        .await
        .unwrap();
    let end = next_json(&mut client, Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(end["id"], 2, "{end}");
    serving.await.unwrap().unwrap();
}

/// A listen naming more resources than `resources/subscribe` lets a session hold is
/// refused before any is looked at; one at the cap is taken whole.
#[tokio::test]
async fn a_modern_subscription_storm_is_refused_past_the_cap() {
    let (_storage, server) = watched();
    let storm: Vec<String> = (0..100_000).map(|i| format!("file:///f{i}.md")).collect();
    let cap: Vec<String> = storm[..MAX_RESOURCE_SUBSCRIPTIONS].to_vec();
    let listen = |id: u64, uris: &[String]| {
        json!({"jsonrpc": "2.0", "id": id, "method": "subscriptions/listen", "params": modern(json!({
            "notifications": {"resourceSubscriptions": uris},
        }))})
        .to_string()
    };
    let (mut client, serving) = serve_client(server);
    client.send(&listen(1, &storm)).await;
    let refused = next_json(&mut client, Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(refused["id"], 1);
    assert_eq!(refused["error"]["code"], INVALID_PARAMS);
    assert_eq!(
        refused["error"]["message"],
        "Invalid params: \"notifications.resourceSubscriptions\" names 100000 resources; one subscription may watch at most 64"
    );
    client.send(&listen(2, &cap[..])).await;
    let ack = next_json(&mut client, Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(
        ack["params"]["notifications"]["resourceSubscriptions"],
        json!(cap)
    );
    let bad = json!({"jsonrpc": "2.0", "id": 3, "method": "subscriptions/listen", "params": modern(json!({
        "notifications": {"resourceSubscriptions": [5]},
    }))});
    client.send(&bad.to_string()).await;
    let refused = next_json(&mut client, Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(refused["id"], 3);
    assert_eq!(
        refused["error"]["message"],
        "Invalid params: \"notifications.resourceSubscriptions\" must hold strings, resource URIs as resources/list gives them"
    );
    tokio::io::AsyncWriteExt::shutdown(&mut client.input)
        .await
        .unwrap();
    let end = next_json(&mut client, Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(end["id"], 2, "{end}");
    serving.await.unwrap().unwrap();
}
