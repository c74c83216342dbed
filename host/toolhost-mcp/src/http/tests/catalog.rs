//! The catalog and file subscriptions over HTTP: prompts answered in a session, and
//! each session's subscriptions (and their cap) and notifications its own.

use hyper::body::Incoming;
use toolhost::tools::VfsToolOptions;
use toolhost::vfs::{MemoryStorage, Storage};

use super::*;
use crate::limits::MAX_RESOURCE_SUBSCRIPTIONS;
use crate::tests::catalog::{registry_with, Mode};
use crate::FileResources;

async fn ask(addr: SocketAddr, session: &str, method: &str, params: Value) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 9, "method": method, "params": params});
    let headers = [(SESSION_HEADER, session), (PROTOCOL_HEADER, "2025-06-18")];
    post(addr, &headers, &body.to_string()).await.json()
}

/// Opens `session`'s GET stream and gives its body once the session's notifier is
/// attached to it.
async fn open_stream(addr: SocketAddr, app: &Arc<super::super::App>, session: &str) -> Incoming {
    let stream = TcpStream::connect(addr).await.unwrap();
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(connection);
    let request = hyper::Request::get(MCP_PATH)
        .header("host", format!("127.0.0.1:{}", addr.port()))
        .header("accept", "text/event-stream")
        .header(SESSION_HEADER, session)
        .body(Full::new(Bytes::new()))
        .unwrap();
    let response = sender.send_request(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let found = app
        .sessions
        .find(session, &crate::http::caller::Caller::default(), None)
        .await
        .unwrap();
    until("the stream is attached", || found.notifier().is_connected()).await;
    response.into_body()
}

/// The next message on a stream, or `None` when none comes within `wait`.
async fn next_event(body: &mut Incoming, wait: Duration) -> Option<Value> {
    let frame = tokio::time::timeout(wait, body.frame()).await.ok()??.ok()?;
    let data = frame.into_data().ok()?;
    let text = std::str::from_utf8(&data).unwrap();
    let json = text
        .lines()
        .find_map(|line| line.strip_prefix("data: "))
        .unwrap_or_else(|| panic!("an event with data: {text:?}"));
    Some(serde_json::from_str(json).unwrap())
}

#[tokio::test]
async fn each_session_has_its_own_subscriptions_and_hears_of_them_alone() {
    let (registry, _) = registry_with(Some(Mode::Good), &[]);
    let storage = Arc::new(MemoryStorage::new());
    for path in ["a.md", "b.md"] {
        storage.write(path, b"first", "").unwrap();
    }
    let files = FileResources::new(
        VfsToolOptions::builder(Arc::clone(&storage) as Arc<dyn Storage>).build(),
    );
    let server = HttpServer::bind(
        "127.0.0.1:0".parse().unwrap(),
        stateful().with_list_changed(true),
        Registries::shared_with_files(registry, files),
    )
    .await
    .unwrap();
    let (addr, app) = (server.local_addr(), Arc::clone(&server.service.app));
    let (stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(server.serve(async {
        let _ = stopped.await;
    }));
    let mut sessions = Vec::new();
    for _ in 0..2 {
        let reply = post(addr, &[], INIT).await;
        let capabilities = &reply.json()["result"]["capabilities"];
        assert_eq!(capabilities["prompts"], json!({"listChanged": true}));
        assert_eq!(
            capabilities["resources"],
            json!({"listChanged": true, "subscribe": true})
        );
        sessions.push(reply.session());
    }
    let (alice, bob) = (&sessions[0], &sessions[1]);
    let prompt = ask(
        addr,
        alice,
        "prompts/get",
        json!({"name": "greet", "arguments": {"who": "Ada"}}),
    )
    .await;
    assert_eq!(
        prompt["result"]["messages"][0]["content"]["text"],
        "Hello, Ada! (greet, plain)"
    );
    let ok = json!({"jsonrpc": "2.0", "id": 9, "result": {}});
    assert_eq!(
        ask(
            addr,
            alice,
            "resources/subscribe",
            json!({"uri": "file:///a.md"})
        )
        .await,
        ok
    );
    assert_eq!(
        ask(
            addr,
            bob,
            "resources/subscribe",
            json!({"uri": "file:///b.md"})
        )
        .await,
        ok
    );
    // Alice fills her subscriptions; Bob's are his own.
    for at in 1..MAX_RESOURCE_SUBSCRIPTIONS {
        let uri = format!("file:///f{at}.md");
        assert_eq!(
            ask(addr, alice, "resources/subscribe", json!({"uri": uri})).await,
            ok
        );
    }
    let refused = ask(
        addr,
        alice,
        "resources/subscribe",
        json!({"uri": "file:///one-more.md"}),
    )
    .await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert_eq!(
        ask(
            addr,
            bob,
            "resources/subscribe",
            json!({"uri": "file:///one-more.md"})
        )
        .await,
        ok
    );

    let mut alice_stream = open_stream(addr, &app, alice).await;
    let mut bob_stream = open_stream(addr, &app, bob).await;
    // The first poll sees the files as they are.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    storage.write("a.md", b"second", "").unwrap();
    let note = next_event(&mut alice_stream, Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(
        note,
        json!({"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": "file:///a.md"}})
    );
    assert_eq!(
        next_event(&mut bob_stream, Duration::from_millis(1500)).await,
        None
    );
    storage.write("b.md", b"second", "").unwrap();
    let note = next_event(&mut bob_stream, Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(note["params"]["uri"], "file:///b.md");
    assert_eq!(
        next_event(&mut alice_stream, Duration::from_millis(1500)).await,
        None
    );
    let _ = stop.send(());
}
