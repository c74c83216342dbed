//! Resources over HTTP: each session of a per-session root sees its own files only; a
//! shared root's resources are every session's; without files, no capability.

use toolhost::tools::{register_vfs_tools, VfsToolOptions};

use super::*;
use crate::{FileResources, HEADER_MISMATCH};

async fn serve(registries: Registries) -> (SocketAddr, oneshot::Sender<()>) {
    let server = HttpServer::bind("127.0.0.1:0".parse().unwrap(), stateful(), registries)
        .await
        .unwrap();
    let addr = server.local_addr();
    let (stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(server.serve(async {
        let _ = stopped.await;
    }));
    (addr, stop)
}

/// Opens a session, checks its capabilities, and gives its headers' values.
async fn open(addr: SocketAddr, resources: bool) -> String {
    let reply = post(addr, &[], INIT).await;
    let capabilities = &reply.json()["result"]["capabilities"];
    assert_eq!(
        capabilities.get("resources").is_some(),
        resources,
        "{capabilities}"
    );
    assert_eq!(
        capabilities.get("completions").is_some(),
        resources,
        "{capabilities}"
    );
    reply.session()
}

async fn ask(addr: SocketAddr, session: &str, method: &str, params: Value) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 9, "method": method, "params": params});
    let headers = [(SESSION_HEADER, session), (PROTOCOL_HEADER, "2025-06-18")];
    post(addr, &headers, &body.to_string()).await.json()
}

fn names(list: &Value) -> Vec<String> {
    list["result"]["resources"]
        .as_array()
        .unwrap_or_else(|| panic!("a list: {list}"))
        .iter()
        .map(|r| r["name"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn each_session_sees_its_own_root_only() {
    let base = tempfile::tempdir().unwrap();
    let template =
        SessionRootTemplate::parse(&format!("{}/{{session}}", base.path().display())).unwrap();
    let registries = Registries::per_session_root_with_files(template, |storage, _info| {
        let options = VfsToolOptions::new(storage);
        let registry = Registry::new();
        register_vfs_tools(&registry, options.clone()).map_err(|err| err.to_string())?;
        Ok((registry, Some(FileResources::new(options))))
    });
    let (addr, _stop) = serve(registries).await;
    let (alice, bob) = (open(addr, true).await, open(addr, true).await);
    for (session, path, text) in [
        (&alice, "mine.md", "alice's"),
        (&bob, "mine.md", "bob's"),
        (&bob, "bob-only.md", "secret"),
    ] {
        let written = ask(
            addr,
            session,
            "tools/call",
            json!({"name": "write_file", "arguments": {"path": path, "content": text}}),
        )
        .await;
        assert_eq!(written["result"]["isError"], false, "{written}");
    }
    assert_eq!(
        names(&ask(addr, &alice, "resources/list", json!({})).await),
        ["mine.md"]
    );
    assert_eq!(
        names(&ask(addr, &bob, "resources/list", json!({})).await),
        ["bob-only.md", "mine.md"]
    );
    let read = ask(
        addr,
        &alice,
        "resources/read",
        json!({"uri": "file:///mine.md"}),
    )
    .await;
    assert_eq!(read["result"]["contents"][0]["text"], "alice's");
    let read = ask(
        addr,
        &bob,
        "resources/read",
        json!({"uri": "file:///mine.md"}),
    )
    .await;
    assert_eq!(read["result"]["contents"][0]["text"], "bob's");
    // Bob's file is not in Alice's root, by name or by a way out of it.
    let missing = ask(
        addr,
        &alice,
        "resources/read",
        json!({"uri": "file:///bob-only.md"}),
    )
    .await;
    assert_eq!(missing["error"]["code"], -32002, "{missing}");
    let escape = format!("file:///../{bob}/bob-only.md");
    let refused = ask(addr, &alice, "resources/read", json!({"uri": escape})).await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert!(!refused.to_string().contains("secret"));
    let completed = ask(
        addr,
        &alice,
        "completion/complete",
        json!({"ref": {"type": "ref/resource", "uri": "file:///{path}"}, "argument": {"name": "path", "value": ""}}),
    )
    .await;
    assert_eq!(
        completed["result"]["completion"]["values"],
        json!(["mine.md"])
    );
}

#[tokio::test]
async fn a_shared_root_is_offered_to_every_session_and_none_without_one() {
    let storage = Arc::new(toolhost::vfs::MemoryStorage::new());
    toolhost::vfs::Storage::write(&*storage, "a.md", b"shared", "").unwrap();
    let options = VfsToolOptions::new(storage);
    let (addr, _stop) = serve(Registries::shared_with_files(
        Arc::new(Registry::new()),
        FileResources::new(options),
    ))
    .await;
    for _ in 0..2 {
        let session = open(addr, true).await;
        let read = ask(
            addr,
            &session,
            "resources/read",
            json!({"uri": "file:///a.md"}),
        )
        .await;
        assert_eq!(read["result"]["contents"][0]["text"], "shared");
        // The modern era, on the same server.
        let version = (PROTOCOL_HEADER, "2026-07-28");
        let body = modern(3, "resources/templates/list", None);
        let reply = post(
            addr,
            &[version, ("mcp-method", "resources/templates/list")],
            &body,
        )
        .await
        .json();
        assert_eq!(
            reply["result"]["resourceTemplates"][0]["uriTemplate"],
            "file:///{path}"
        );
        assert_eq!(reply["result"]["resultType"], "complete");
    }
    // A modern read names its URI in Mcp-Name too, and the two must agree.
    let mut read = serde_json::from_str::<Value>(&modern(4, "resources/read", None)).unwrap();
    read["params"]["uri"] = json!("file:///a.md");
    let read = read.to_string();
    let version = (PROTOCOL_HEADER, "2026-07-28");
    let method = ("mcp-method", "resources/read");
    let reply = post(
        addr,
        &[version, method, ("mcp-name", "file:///a.md")],
        &read,
    )
    .await
    .json();
    assert_eq!(reply["result"]["contents"][0]["text"], "shared", "{reply}");
    let reply = post(
        addr,
        &[version, method, ("mcp-name", "file:///b.md")],
        &read,
    )
    .await
    .json();
    assert_eq!(reply["error"]["code"], HEADER_MISMATCH, "{reply}");
    let reply = post(addr, &[version, method], &read).await.json();
    assert_eq!(
        reply["error"]["message"],
        "Header mismatch: no Mcp-Name header; send the resource's URI in Mcp-Name (as =?base64?...?= when it is not plain ASCII)"
    );
    let (plain, _stop) = serve(Registries::shared(Arc::new(Registry::new()))).await;
    let session = open(plain, false).await;
    let answer = ask(plain, &session, "resources/list", json!({})).await;
    assert_eq!(answer["error"]["code"], -32601, "{answer}");
}
