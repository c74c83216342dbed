//! What the catalog serves: prompts (listed, filled in, completed), resources of
//! sources beside the files, both eras, against hostile sources.

use std::time::Instant;

use super::*;
use crate::jsonrpc::METHOD_NOT_FOUND;
use crate::limits::MAX_CATALOG_RESULT_BYTES;
use crate::resources::RESOURCE_NOT_FOUND;

#[tokio::test]
async fn prompts_are_listed_and_filled_in_with_every_kind_of_block() {
    let (registry, _) = registry_with(Some(Mode::Good), &[]);
    let answers = serve(
        McpServer::new(registry).with_page_size(1),
        &[
            request("initialize", json!({"protocolVersion": "2025-06-18"})),
            request("prompts/list", json!({})),
            request(
                "prompts/get",
                json!({"name": "greet", "arguments": {"who": "Ada"}}),
            ),
            request(
                "prompts/get",
                json!({"name": "greet", "arguments": {"tone": "warm"}}),
            ),
            request("prompts/get", json!({"name": "nope"})),
            request(
                "prompts/get",
                json!({"name": "greet", "arguments": {"who": 7}}),
            ),
            request(
                "prompts/get",
                json!({"name": "greet", "arguments": ["Ada"]}),
            ),
            request("prompts/get", json!({"arguments": {}})),
            request("prompts/get", json!({"name": "plain"})),
        ],
    )
    .await;
    assert_eq!(
        answers[0]["result"]["capabilities"],
        json!({"tools": {"listChanged": false}, "logging": {}, "prompts": {"listChanged": false}})
    );
    let first = &answers[1]["result"];
    assert_eq!(
        first["prompts"],
        json!([{
            "name": "greet", "title": "Greeting", "description": "Greets someone.",
            "arguments": [
                {"name": "who", "description": "Whom to greet.", "required": true},
                {"name": "tone", "required": false},
            ],
        }])
    );
    let cursor = first["nextCursor"].as_str().unwrap().to_owned();
    assert_eq!(
        answers[2]["result"],
        json!({
            "description": "A greeting.",
            "messages": [
                {"role": "user", "content": {"type": "text", "text": "Hello, Ada! (greet, plain)"}},
                {"role": "assistant", "content": {"type": "image", "data": "AQID", "mimeType": "image/png"}},
                {"role": "user", "content": {"type": "resource_link", "uri": "plugin://notes/a", "name": "a", "description": "Note a."}},
                {"role": "user", "content": {"type": "resource", "resource": {"uri": "plugin://notes/b", "mimeType": "application/octet-stream", "blob": "/wA="}}},
            ],
        })
    );
    assert_refused(&answers[3], INVALID_PARAMS, &["needs argument \"who\""]);
    assert_refused(
        &answers[4],
        INVALID_PARAMS,
        &["unknown prompt \"nope\"", "prompts/list"],
    );
    assert_refused(
        &answers[5],
        INVALID_PARAMS,
        &["argument \"who\" must be a string, got a number"],
    );
    assert_refused(
        &answers[6],
        INVALID_PARAMS,
        &["object of strings", "got an array"],
    );
    assert_refused(&answers[7], INVALID_PARAMS, &["\"name\" must be a string"]);
    assert_eq!(
        answers[8]["result"]["messages"].as_array().unwrap().len(),
        4
    );

    // The second page, through the cursor; a tools/list cursor and a forged one are
    // refused, and a prompts/list cursor is refused by tools/list.
    let (registry, _) = registry_with(Some(Mode::Good), &[]);
    let pages = serve(
        McpServer::new(registry).with_page_size(1),
        &[
            request("prompts/list", json!({"cursor": cursor})),
            request("prompts/list", json!({"cursor": "c1.1.6772656574"})),
            request("prompts/list", json!({"cursor": "pc1.1.6e6f7065"})),
            request("tools/list", json!({"cursor": cursor})),
            request("prompts/list", json!({"cursor": 5})),
        ],
    )
    .await;
    assert_eq!(pages[0]["result"]["prompts"][0]["name"], "plain");
    assert_eq!(pages[0]["result"].get("nextCursor"), None);
    assert_refused(
        &pages[1],
        INVALID_PARAMS,
        &["not a cursor this server gave"],
    );
    assert_refused(
        &pages[2],
        INVALID_PARAMS,
        &["prompt list changed", "\"nope\" is gone"],
    );
    assert_refused(
        &pages[3],
        INVALID_PARAMS,
        &["not a cursor this server gave"],
    );
    assert_refused(&pages[4], INVALID_PARAMS, &["\"cursor\" must be a string"]);
}

#[tokio::test]
async fn a_server_without_a_catalog_answers_as_before() {
    let answers = serve(
        McpServer::new(Arc::new(Registry::new())),
        &[
            request("initialize", json!({"protocolVersion": "2025-06-18"})),
            request("prompts/list", json!({})),
            request("prompts/get", json!({"name": "greet"})),
            request("resources/subscribe", json!({"uri": "file:///a.md"})),
        ],
    )
    .await;
    assert_eq!(
        answers[0]["result"]["capabilities"],
        json!({"tools": {"listChanged": false}, "logging": {}})
    );
    for (answer, method) in
        answers[1..]
            .iter()
            .zip(["prompts/list", "prompts/get", "resources/subscribe"])
    {
        assert_refused(
            answer,
            METHOD_NOT_FOUND,
            &[&format!("Method not found: {method}")],
        );
    }
}

#[tokio::test]
async fn a_hundred_megabyte_prompt_is_refused() {
    let (registry, _) = registry_with(Some(Mode::Floods), &[]);
    let answers = serve(
        McpServer::new(registry),
        &[request(
            "prompts/get",
            json!({"name": "greet", "arguments": {"who": "Ada"}}),
        )],
    )
    .await;
    assert_refused(
        &answers[0],
        INTERNAL_ERROR,
        &[
            "prompt \"greet\" gave a result of 104857",
            &format!("over the {MAX_CATALOG_RESULT_BYTES}-byte cap"),
        ],
    );
}

#[tokio::test]
async fn a_source_that_never_answers_is_stopped_at_the_call_timeout() {
    let (registry, cancelled) = registry_with(
        Some(Mode::Hangs),
        &[("plugin://slow/", Mode::Hangs, 10, 10)],
    );
    let started = Instant::now();
    let answers = serve(
        McpServer::new(registry),
        &[
            request("prompts/get", json!({"name": "plain"})),
            request("resources/list", json!({})),
            request("resources/read", json!({"uri": "plugin://slow/r1"})),
        ],
    )
    .await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_refused(
        &answers[0],
        INTERNAL_ERROR,
        &["prompt \"plain\" did not answer within 0.3 s"],
    );
    assert_refused(
        &answers[1],
        INTERNAL_ERROR,
        &["the resource source of plugin://slow/ did not answer within 0.3 s"],
    );
    assert_refused(
        &answers[2],
        INTERNAL_ERROR,
        &["the source of \"plugin://slow/r1\" did not answer within 0.3 s"],
    );
    // The sources' contexts were cancelled: their work stops too.
    assert!(cancelled.load(Ordering::SeqCst));
}

#[tokio::test]
async fn a_cancelled_prompt_is_not_answered() {
    let (registry, cancelled) = registry_timed(Duration::from_secs(30), Some(Mode::Hangs), &[]);
    let (mut client, serving) = serve_client(McpServer::new(registry));
    client
        .send(r#"{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"plain"}}"#)
        .await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    client
        .send(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}"#)
        .await;
    client
        .send(r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#)
        .await;
    let answer: Value =
        serde_json::from_str(&client.answer_within(Duration::from_secs(5)).await.unwrap()).unwrap();
    assert_eq!(answer["id"], 2, "{answer}");
    assert_eq!(client.answer_within(Duration::from_millis(300)).await, None);
    for _ in 0..50 {
        if cancelled.load(Ordering::SeqCst) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(cancelled.load(Ordering::SeqCst));
    drop(client);
    serving.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_million_resources_on_one_page_go_out_a_page_at_a_time() {
    let (registry, _) = registry_with(None, &[("plugin://big/", Mode::Good, 1_000_000, 1_000_000)]);
    let server = McpServer::new(registry);
    let mut cursor: Option<String> = None;
    for page in 0..3 {
        let params = cursor.as_ref().map_or(json!({}), |c| json!({"cursor": c}));
        let answers = serve(server.clone(), &[request("resources/list", params)]).await;
        let result = &answers[0]["result"];
        let resources = result["resources"].as_array().unwrap();
        assert_eq!(resources.len(), 100, "page {page}");
        assert_eq!(resources[0]["uri"], format!("plugin://big/r{}", page * 100));
        assert_eq!(
            resources[99],
            json!({"uri": format!("plugin://big/r{}", page * 100 + 99), "name": format!("r{}", page * 100 + 99), "mimeType": "text/plain", "size": 1})
        );
        cursor = Some(result["nextCursor"].as_str().unwrap().to_owned());
    }
}

#[tokio::test]
async fn files_and_sources_are_one_sequence() {
    let (registry, _) = registry_with(
        None,
        &[
            ("plugin://a/", Mode::Good, 2, 3),
            ("test://b/", Mode::Good, 10, 1),
        ],
    );
    let (_storage, files) = memory_files(&["x.md", "y.md", "z.md"]);
    let server = McpServer::new(registry)
        .with_page_size(2)
        .with_resources(files);
    let mut uris = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..10 {
        let params = cursor.as_ref().map_or(json!({}), |c| json!({"cursor": c}));
        let answers = serve(server.clone(), &[request("resources/list", params)]).await;
        let result = &answers[0]["result"];
        for resource in result["resources"].as_array().unwrap() {
            uris.push(resource["uri"].as_str().unwrap().to_owned());
        }
        match result["nextCursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => break,
        }
    }
    assert_eq!(
        uris,
        [
            "file:///x.md",
            "file:///y.md",
            "file:///z.md",
            "plugin://a/r0",
            "plugin://a/r1",
            "plugin://a/r2",
            "test://b/r0",
        ]
    );
    let gone = "s1.706c7567696e3a2f2f676f6e652f.0.-"; // plugin://gone/
    let answers = serve(
        server,
        &[
            request("resources/templates/list", json!({})),
            request("resources/read", json!({"uri": "plugin://a/r1"})),
            request("resources/read", json!({"uri": "file:///y.md"})),
            request("resources/read", json!({"uri": "plugin://a/missing"})),
            request("resources/read", json!({"uri": "other://x"})),
            request("resources/list", json!({"cursor": gone})),
            request("resources/list", json!({"cursor": "s1.zz.0.-"})),
            request("resources/list", json!({"cursor": "s1.706c7567696e3a2f2f612f.0.7a"})),
            request("completion/complete", json!({"ref": {"type": "ref/resource", "uri": "file:///{path}"}, "argument": {"name": "path", "value": "y"}})),
        ],
    )
    .await;
    assert_eq!(
        answers[0]["result"]["resourceTemplates"],
        json!([
            {"uriTemplate": "file:///{path}", "name": "file", "title": "File under the root", "description": "A file under the server's storage root, by its path relative to the root (e.g. notes/todo.md); completion/complete suggests paths."},
            {"uriTemplate": "plugin://a/{id}", "name": "item", "description": "An item by id.", "mimeType": "text/plain"},
            {"uriTemplate": "test://b/{id}", "name": "item", "description": "An item by id.", "mimeType": "text/plain"},
        ])
    );
    assert_eq!(
        answers[1]["result"],
        json!({"contents": [{"uri": "plugin://a/r1", "mimeType": "text/plain", "text": "text of plugin://a/r1"}]})
    );
    assert_eq!(answers[2]["result"]["contents"][0]["text"], "content");
    assert_refused(&answers[3], RESOURCE_NOT_FOUND, &["no plugin://a/missing"]);
    assert_eq!(
        answers[3]["error"]["data"],
        json!({"uri": "plugin://a/missing"})
    );
    assert_refused(&answers[4], INVALID_PARAMS, &["not a file:/// URI"]);
    assert_refused(
        &answers[5],
        INVALID_PARAMS,
        &["no source owns plugin://gone/", "list again"],
    );
    assert_refused(
        &answers[6],
        INVALID_PARAMS,
        &["not a cursor this server gave"],
    );
    // A cursor the source never gave is the source's to refuse.
    assert_refused(&answers[7], INVALID_PARAMS, &["not my cursor"]);
    assert_eq!(
        answers[8]["result"]["completion"]["values"],
        json!(["y.md"])
    );
}

#[tokio::test]
async fn sources_cannot_answer_outside_their_namespace_or_cap() {
    let (registry, _) = registry_with(
        None,
        &[
            ("plugin://stray/", Mode::Strays, 3, 3),
            ("plugin://big/", Mode::Floods, 3, 3),
        ],
    );
    let answers = serve(
        McpServer::new(registry),
        &[
            request("resources/list", json!({})),
            request("resources/read", json!({"uri": "plugin://stray/r0"})),
            request("resources/read", json!({"uri": "plugin://big/r0"})),
            request("resources/read", json!({"uri": "file:///notes.md"})),
            request(
                "resources/read",
                json!({"uri": format!("plugin://stray/{}", "a".repeat(4000))}),
            ),
            request("resources/read", json!({})),
        ],
    )
    .await;
    let listed: Vec<&str> = answers[0]["result"]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["uri"].as_str().unwrap())
        .collect();
    assert_eq!(
        listed,
        [
            "plugin://stray/r0",
            "plugin://stray/r1",
            "plugin://stray/r2"
        ]
    );
    assert_refused(
        &answers[1],
        INTERNAL_ERROR,
        &["returned content for \"plugin://other/x\", outside its namespace plugin://stray/"],
    );
    assert_refused(
        &answers[2],
        INTERNAL_ERROR,
        &[&format!("over the {MAX_CATALOG_RESULT_BYTES}-byte cap")],
    );
    assert_refused(
        &answers[3],
        INVALID_PARAMS,
        &["no resource source owns \"file:///notes.md\""],
    );
    assert_refused(&answers[4], INVALID_PARAMS, &["over the 3080-byte limit"]);
    assert_refused(&answers[5], INVALID_PARAMS, &["\"uri\" must be a string"]);
}

#[tokio::test]
async fn prompt_completions_are_capped() {
    let (registry, _) = registry_with(Some(Mode::Floods), &[]);
    let answers = serve(
        McpServer::new(registry),
        &[
            request("completion/complete", json!({"ref": {"type": "ref/prompt", "name": "greet"}, "argument": {"name": "who", "value": "A"}})),
            request("completion/complete", json!({"ref": {"type": "ref/prompt", "name": "greet"}, "argument": {"name": "whom", "value": "A"}})),
            request("completion/complete", json!({"ref": {"type": "ref/prompt", "name": "nope"}, "argument": {"name": "who", "value": ""}})),
            request("completion/complete", json!({"ref": {"type": "ref/prompt", "name": "greet"}, "argument": {"name": "who"}})),
        ],
    )
    .await;
    let completion = &answers[0]["result"]["completion"];
    assert_eq!(completion["values"].as_array().unwrap().len(), 100);
    assert_eq!(completion["values"][99], "Awho99");
    assert_eq!(
        (&completion["total"], &completion["hasMore"]),
        (&json!(1000), &json!(true))
    );
    assert_refused(
        &answers[1],
        INVALID_PARAMS,
        &["has no argument \"whom\"", "[who, tone]"],
    );
    assert_refused(&answers[2], INVALID_PARAMS, &["unknown prompt \"nope\""]);
    assert_refused(&answers[3], INVALID_PARAMS, &["\"argument\" must be"]);
}

#[tokio::test]
async fn the_modern_era_gets_its_result_fields() {
    let (registry, _) = registry_with(Some(Mode::Good), &[("plugin://a/", Mode::Good, 5, 2)]);
    let answers = serve(
        McpServer::new(registry),
        &[
            request("prompts/list", modern(json!({}))),
            request("prompts/get", modern(json!({"name": "plain"}))),
            request("resources/list", modern(json!({}))),
            request("resources/read", modern(json!({"uri": "plugin://a/r0"}))),
            request("resources/templates/list", modern(json!({}))),
            request("server/discover", modern(json!({}))),
            request("resources/subscribe", modern(json!({"uri": "file:///a"}))),
        ],
    )
    .await;
    for (answer, hints) in answers[..5].iter().zip([
        Some((300_000, "public")),
        None,
        Some((0, "private")),
        Some((0, "private")),
        Some((300_000, "public")),
    ]) {
        let result = &answer["result"];
        assert_eq!(result["resultType"], "complete", "{answer}");
        assert_eq!(
            result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
            "wasm-toolhost"
        );
        match hints {
            Some((ttl, scope)) => {
                assert_eq!(
                    (&result["ttlMs"], &result["cacheScope"]),
                    (&json!(ttl), &json!(scope))
                );
            }
            None => assert_eq!(result.get("ttlMs"), None),
        }
    }
    assert_eq!(
        answers[5]["result"]["capabilities"],
        // `subscribe`: through subscriptions/listen's resourceSubscriptions.
        json!({"tools": {"listChanged": false}, "logging": {}, "prompts": {"listChanged": false}, "resources": {"subscribe": true}, "completions": {}})
    );
    assert_refused(&answers[6], METHOD_NOT_FOUND, &["resources/subscribe"]);
}
