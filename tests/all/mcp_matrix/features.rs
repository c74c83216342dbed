//! One function per feature: what happened when a cell's client tried it.

use super::*;

pub(super) async fn tools(c: &mut Client) -> String {
    let list = c.request("tools/list", json!({})).await;
    assert!(
        list["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|tool| tool["name"] == "echo"),
        "{list}"
    );
    assert!(declared(c, "/tools"), "{}", c.capabilities);
    let call = c
        .request("tools/call", json!({"name": "echo", "arguments": {}}))
        .await;
    format!("served: {}", text(&call))
}

pub(super) async fn rich(c: &mut Client) -> String {
    let call = c
        .request("tools/call", json!({"name": "rich", "arguments": {}}))
        .await;
    let kinds: Vec<&str> = call["result"]["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|block| block["type"].as_str().unwrap())
        .collect();
    kinds.join(",")
}

pub(super) async fn structured(c: &mut Client) -> String {
    let call = c
        .request("tools/call", json!({"name": "stats", "arguments": {}}))
        .await;
    assert_eq!(text(&call), r#"{"n":1}"#, "{call}");
    match call["result"].get("structuredContent") {
        Some(content) => format!("structuredContent {content}"),
        None => "text only".into(),
    }
}

pub(super) async fn prompts(c: &mut Client) -> String {
    let list = c.request("prompts/list", json!({})).await;
    assert_eq!(list["result"]["prompts"][0]["name"], "greet", "{list}");
    assert!(declared(c, "/prompts"), "{}", c.capabilities);
    let prompt = c
        .request(
            "prompts/get",
            json!({"name": "greet", "arguments": {"who": "Ada"}}),
        )
        .await;
    let kinds: Vec<&str> = prompt["result"]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|message| message["content"]["type"].as_str().unwrap())
        .collect();
    format!(
        "served: {}, {}",
        prompt["result"]["messages"][0]["content"]["text"],
        kinds.join(",")
    )
}

pub(super) async fn resources(c: &mut Client) -> String {
    let list = c.request("resources/list", json!({})).await;
    assert_eq!(
        list["result"]["resources"][0]["uri"], "file:///a.md",
        "{list}"
    );
    assert!(declared(c, "/resources"), "{}", c.capabilities);
    let cursor = list["result"]["nextCursor"].clone();
    let next = c.request("resources/list", json!({"cursor": cursor})).await;
    assert_eq!(
        next["result"]["resources"][0]["uri"], "plugin://docs/a",
        "{next}"
    );
    let file = c
        .request("resources/read", json!({"uri": "file:///a.md"}))
        .await;
    let doc = c
        .request("resources/read", json!({"uri": "plugin://docs/a"}))
        .await;
    format!(
        "served: {} {}",
        file["result"]["contents"][0]["text"], doc["result"]["contents"][0]["text"]
    )
}

pub(super) async fn templates(c: &mut Client) -> String {
    let list = c.request("resources/templates/list", json!({})).await;
    assert!(declared(c, "/resources"), "{}", c.capabilities);
    let uris: Vec<&str> = list["result"]["resourceTemplates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["uriTemplate"].as_str().unwrap())
        .collect();
    format!("served: {}", uris.join(" "))
}

pub(super) async fn completion(c: &mut Client) -> String {
    let prompt = c
        .request(
            "completion/complete",
            json!({"ref": {"type": "ref/prompt", "name": "greet"}, "argument": {"name": "who", "value": "A"}}),
        )
        .await;
    let path = c
        .request(
            "completion/complete",
            json!({"ref": {"type": "ref/resource", "uri": "file:///{path}"}, "argument": {"name": "path", "value": "a"}}),
        )
        .await;
    assert!(declared(c, "/completions"), "{}", c.capabilities);
    format!(
        "served: {} {}",
        prompt["result"]["completion"]["values"], path["result"]["completion"]["values"]
    )
}

pub(super) async fn subscribe(c: &mut Client) -> String {
    if c.revision.is_modern() {
        // 2026-07-28: no resources/subscribe; subscriptions/listen names the resources.
        assert!(declared(c, "/resources/subscribe"), "{}", c.capabilities);
        let notifications = json!({"resourceSubscriptions": ["plugin://docs/a"]});
        let heard = listen(c, notifications, |registry| {
            registry
                .catalog()
                .replace("docs", Some(Arc::new(Prompts)), Some(Arc::new(Docs)), None)
                .unwrap();
        })
        .await;
        let answer = c
            .request("resources/subscribe", json!({"uri": "file:///a.md"}))
            .await;
        return format!(
            "listen: {heard} (source's resource); resources/subscribe {}",
            code(&answer)
        );
    }
    let answer = c
        .request("resources/subscribe", json!({"uri": "file:///a.md"}))
        .await;
    assert_eq!(
        declared(c, "/resources/subscribe"),
        answer.get("result").is_some(),
        "{}",
        c.capabilities
    );
    let Some(result) = answer.get("result") else {
        return code(&answer);
    };
    // The first poll (each second) sets what later ones compare with; a change after
    // it is told once.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    c.storage
        .write("a.md", b"# changed\n", "text/markdown")
        .unwrap();
    let note = c.next_unasked().await.expect("an update");
    assert_eq!(note["params"]["uri"], "file:///a.md", "{note}");
    // A source's resource: told of when the catalog changes (here: the source given
    // again), among the list changes that brings.
    let plugin = c
        .request("resources/subscribe", json!({"uri": "plugin://docs/a"}))
        .await;
    assert_eq!(plugin["result"], json!({}), "{plugin}");
    c.registry
        .catalog()
        .replace("docs", Some(Arc::new(Prompts)), Some(Arc::new(Docs)), None)
        .unwrap();
    let mut updated = None;
    for _ in 0..4 {
        let next = c.next_unasked().await.expect("the catalog's news");
        if next["method"] == "notifications/resources/updated" {
            updated = Some(next);
            break;
        }
    }
    let updated = updated.expect("an update of the source's resource");
    assert_eq!(updated["params"]["uri"], "plugin://docs/a", "{updated}");
    format!(
        "served: {result}, then {} (file and source's resource)",
        note["method"].as_str().unwrap()
    )
}

pub(super) async fn elicitation(c: &mut Client) -> String {
    let call = c
        .request("tools/call", json!({"name": "ask", "arguments": {}}))
        .await;
    answered_rounds(c, call, "ask").await
}

/// A tool sampling the client's model: a `sampling/createMessage` on the call's channel
/// ("sent, TEXT"), or an `input_required` round answered with the model's result
/// ("round, TEXT").
pub(super) async fn sampling(c: &mut Client) -> String {
    let call = c
        .request("tools/call", json!({"name": "sample", "arguments": {}}))
        .await;
    if call["result"]["resultType"] == "input_required" {
        let requests = &call["result"]["inputRequests"];
        assert_eq!(requests["q0"]["method"], "sampling/createMessage", "{call}");
        assert_eq!(requests["q0"]["params"]["maxTokens"], 20, "{call}");
        let again = c
            .request(
                "tools/call",
                json!({"name": "sample", "arguments": {},
                       "inputResponses": {"q0": sampled()},
                       "requestState": call["result"]["requestState"]}),
            )
            .await;
        return format!("round, {}", text(&again));
    }
    let sent = c
        .received
        .iter()
        .any(|m| m["method"] == "sampling/createMessage");
    if sent {
        format!("sent, {}", text(&call))
    } else {
        text(&call)
    }
}

pub(super) async fn form(c: &mut Client) -> String {
    let call = c
        .request("tools/call", json!({"name": "choose", "arguments": {}}))
        .await;
    let full = text(&call);
    if let Some(why) = full.strip_prefix("refused: ") {
        // Nothing was sent, and the tool was told why.
        assert!(
            !c.received
                .iter()
                .any(|m| m["method"] == "elicitation/create"),
            "{:?}",
            c.received
        );
        assert!(
            why.contains("2025-06-18") && why.contains("multiple choice"),
            "{why}"
        );
        return "refused".into();
    }
    answered_rounds(c, call, "choose").await
}

/// A question left unanswered: the server gives up after its confirm timeout, tells the
/// client it cancelled its question, and the tool hears `TimedOut`.
pub(super) async fn unanswered(c: &mut Client) -> String {
    c.answers = false;
    let call = c
        .request("tools/call", json!({"name": "ask", "arguments": {}}))
        .await;
    if call["result"]["resultType"] == "input_required" {
        // Nothing waits on the server: the round is the whole answer.
        return "round left unanswered, nothing waits".into();
    }
    let Some(question) = c
        .received
        .iter()
        .find(|m| m["method"] == "elicitation/create")
        .map(|m| m["id"].clone())
    else {
        return text(&call);
    };
    let cancelled = |m: &Value| {
        m["method"] == "notifications/cancelled" && m["params"]["requestId"] == question
    };
    if !c.received.iter().any(cancelled) {
        let note = c.next_unasked().await.expect("the question cancelled");
        assert!(cancelled(&note), "{note}");
    }
    format!("asked, {}, question cancelled", text(&call))
}

pub(super) async fn approval_cell(c: &mut Client) -> String {
    let call = c
        .request("tools/call", json!({"name": "guarded", "arguments": {}}))
        .await;
    answered_rounds(c, call, "guarded").await
}

/// What a call that may ask gave: its text, after answering a modern `input_required`
/// round with `accept` (then "round, TEXT"), or after a legacy `elicitation/create`
/// (then "asked, TEXT").
pub(super) async fn answered_rounds(c: &mut Client, call: Value, tool: &str) -> String {
    if call["result"]["resultType"] == "input_required" {
        let requests = &call["result"]["inputRequests"];
        assert_eq!(requests["q0"]["method"], "elicitation/create", "{call}");
        let again = c
            .request(
                "tools/call",
                json!({"name": tool, "arguments": {},
                       "inputResponses": {"q0": accept(&requests["q0"]["params"])},
                       "requestState": call["result"]["requestState"]}),
            )
            .await;
        return format!("round, {}", text(&again));
    }
    let asked = c
        .received
        .iter()
        .any(|m| m["method"] == "elicitation/create");
    let error = if call["result"]["isError"] == true {
        " (isError)"
    } else {
        ""
    };
    let text = text(&call);
    let text = text.split(':').take(2).collect::<Vec<_>>().join(":");
    if asked {
        format!("asked, {text}{error}")
    } else {
        format!("{text}{error}")
    }
}

pub(super) async fn tasks(c: &mut Client) -> String {
    if c.revision.is_modern() {
        return published_tasks(c).await;
    }
    let start = c.received.len();
    let created = c
        .request_meta(
            "tools/call",
            json!({"name": "count", "arguments": {}, "task": {"ttl": 60000}}),
            json!({"progressToken": "t1"}),
        )
        .await;
    let offered =
        declared(c, "/tasks") || declared(c, "/extensions/io.modelcontextprotocol~1tasks");
    assert_eq!(
        offered,
        created["result"].get("task").is_some(),
        "{}",
        c.capabilities
    );
    let Some(task) = created["result"]["task"]["taskId"]
        .as_str()
        .map(str::to_owned)
    else {
        let got = c.request("tasks/get", json!({"taskId": "x"})).await;
        return format!(
            "call ran plainly ({}, {}), tasks/get {}",
            text(&created),
            progress_since(c, start),
            code(&got)
        );
    };
    let got = c.request("tasks/get", json!({"taskId": task})).await;
    assert!(got["result"]["status"].is_string(), "{got}");
    let result = c.request("tasks/result", json!({"taskId": task})).await;
    assert_eq!(
        result["result"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
        task.as_str(),
        "{result}"
    );
    format!("served: {}, {}", text(&result), progress_since(c, start))
}

/// 2026-07-28's tasks, as the published extension (ext-tasks e434597) has them: the
/// client declares the extension in its request's capabilities and the server decides;
/// the result comes inline from `tasks/get`; `tasks/result` is not there.
async fn published_tasks(c: &mut Client) -> String {
    let start = c.received.len();
    let mut capabilities = c.client_capabilities();
    capabilities["extensions"] = json!({"io.modelcontextprotocol/tasks": {}});
    let declaring = json!({"io.modelcontextprotocol/clientCapabilities": capabilities});
    let mut with_progress = declaring.clone();
    with_progress["progressToken"] = json!("t1");
    let created = c
        .request_meta(
            "tools/call",
            json!({"name": "count", "arguments": {}}),
            with_progress,
        )
        .await;
    let offered = declared(c, "/extensions/io.modelcontextprotocol~1tasks");
    assert_eq!(
        offered,
        created["result"]["resultType"] == "task",
        "{created}"
    );
    let Some(task) = created["result"]["taskId"].as_str().map(str::to_owned) else {
        return format!("call ran plainly ({})", text(&created));
    };
    let mut got = Value::Null;
    for _ in 0..200 {
        got = c
            .request_meta("tasks/get", json!({"taskId": task}), declaring.clone())
            .await;
        if got["result"]["status"] != "working" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(got["result"]["resultType"], "complete", "{got}");
    let inline = json!({"result": got["result"]["result"]});
    let removed = c
        .request_meta("tasks/result", json!({"taskId": task}), declaring)
        .await;
    format!(
        "task, {}: {}, {}, tasks/result {}",
        got["result"]["status"].as_str().unwrap_or_default(),
        text(&inline),
        progress_since(c, start),
        code(&removed)
    )
}

/// Whether progress came since the `start`th message.
pub(super) fn progress_since(c: &Client, start: usize) -> &'static str {
    if c.received[start..]
        .iter()
        .any(|m| m["method"] == "notifications/progress")
    {
        "with progress"
    } else {
        "no progress"
    }
}

pub(super) async fn progress(c: &mut Client) -> String {
    let start = c.received.len();
    let call = c
        .request_meta(
            "tools/call",
            json!({"name": "count", "arguments": {}}),
            json!({"progressToken": "p1"}),
        )
        .await;
    assert_eq!(text(&call), "counted");
    let notes: Vec<&Value> = c.received[start..]
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .collect();
    assert!(
        notes.iter().all(|m| m["params"]["progressToken"] == "p1"),
        "{notes:?}"
    );
    if notes.is_empty() {
        "no progress".into()
    } else {
        "progress before the answer".into()
    }
}

pub(super) async fn logging(c: &mut Client) -> String {
    let (set, extra) = if c.revision.is_modern() {
        let set = c
            .request("logging/setLevel", json!({"level": "info"}))
            .await;
        (
            code(&set),
            json!({"io.modelcontextprotocol/logLevel": "info"}),
        )
    } else {
        let set = c
            .request("logging/setLevel", json!({"level": "info"}))
            .await;
        assert_eq!(set["result"], json!({}), "{set}");
        ("{}".to_owned(), json!({}))
    };
    assert!(declared(c, "/logging"), "{}", c.capabilities);
    let start = c.received.len();
    let call = c
        .request_meta(
            "tools/call",
            json!({"name": "chatty", "arguments": {}}),
            extra,
        )
        .await;
    assert_eq!(text(&call), "said");
    let lines: Vec<&Value> = c.received[start..]
        .iter()
        .filter(|m| m["method"] == "notifications/message")
        .collect();
    assert!(
        lines.iter().any(|m| m["params"]["level"] == "warning"),
        "{lines:?}"
    );
    format!("setLevel {set}, log lines before the answer")
}

pub(super) async fn list_changed(c: &mut Client) -> String {
    assert_eq!(
        c.capabilities["tools"]["listChanged"], true,
        "{}",
        c.capabilities
    );
    if c.revision.is_modern() {
        let notifications = json!({"toolsListChanged": true});
        let heard = listen(c, notifications, |registry| {
            registry.register_all(vec![extra_tool()]).unwrap();
        })
        .await;
        return format!("listen: {heard}");
    }
    c.registry.register_all(vec![extra_tool()]).unwrap();
    let note = c.next_unasked().await.expect("a list change");
    note["method"].as_str().unwrap().to_owned()
}

/// The catalog's source removed: what the client hears (legacy: on its own; modern:
/// through `subscriptions/listen`), in order.
pub(super) async fn catalog_changed(c: &mut Client) -> String {
    assert_eq!(
        (
            &c.capabilities["prompts"]["listChanged"],
            &c.capabilities["resources"]["listChanged"]
        ),
        (&json!(true), &json!(true)),
        "{}",
        c.capabilities
    );
    let mut heard = Vec::new();
    let change = |registry: &Registry| {
        registry
            .catalog()
            .replace("docs", None, None, None)
            .unwrap();
    };
    if c.revision.is_modern() {
        let notifications = json!({"promptsListChanged": true, "resourcesListChanged": true});
        heard.push(listen(c, notifications, change).await);
    } else {
        change(&c.registry);
    }
    while heard.len() < 2 {
        let note = c.next_unasked().await.expect("a list change");
        heard.push(note["method"].as_str().unwrap().to_owned());
    }
    heard.sort();
    heard.join(", ")
}

/// A modern client's `subscriptions/listen` for `notifications`: the acknowledgement,
/// `change`, then the first notification it brings.
pub(super) async fn listen(
    c: &mut Client,
    notifications: Value,
    change: impl FnOnce(&Registry),
) -> String {
    let meta = c.meta(json!({})).unwrap();
    let message = json!({"jsonrpc": "2.0", "id": 99, "method": "subscriptions/listen",
        "params": {"_meta": meta, "notifications": notifications}});
    c.methods.insert(99, ("subscriptions/listen".into(), false));
    let registry = Arc::clone(&c.registry);
    match &mut c.wire {
        Wire::Stdio { write, .. } => write
            .write_all(format!("{message}\n").as_bytes())
            .await
            .unwrap(),
        Wire::Http { addr, stream, .. } => {
            let headers = [
                ("mcp-protocol-version", "2026-07-28"),
                ("mcp-method", "subscriptions/listen"),
            ];
            *stream = Some(post(*addr, &headers, &message.to_string()).await.messages);
        }
    }
    let ack = c.next_unasked().await.expect("an acknowledgement");
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    change(&registry);
    let note = c.next_unasked().await.expect("a list change");
    assert_eq!(
        note["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], 99,
        "{note}"
    );
    note["method"].as_str().unwrap().to_owned()
}
