//! Tasks over HTTP: each session sees only its own, and a task outlives the requests
//! of its client.

use super::*;
use crate::tasks::tests::{task_registry, Spinning};
use crate::tasks::NO_SUCH_TASK;

const INIT_TASKS: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;

struct TaskServer {
    addr: SocketAddr,
    app: Arc<App>,
    stop: oneshot::Sender<()>,
    done: tokio::task::JoinHandle<Result<(), HttpError>>,
}

async fn start_tasks(spinning: &Arc<Spinning>) -> TaskServer {
    let server = HttpServer::bind(
        "127.0.0.1:0".parse().unwrap(),
        stateful(),
        Registries::shared(task_registry(spinning)),
    )
    .await
    .unwrap();
    let (addr, app) = (server.local_addr(), Arc::clone(&server.service.app));
    let (stop, stopped) = oneshot::channel::<()>();
    let done = tokio::spawn(server.serve(async {
        let _ = stopped.await;
    }));
    TaskServer {
        addr,
        app,
        stop,
        done,
    }
}

impl TaskServer {
    async fn stop(self) {
        let _ = self.stop.send(());
        tokio::time::timeout(Duration::from_secs(20), self.done)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
    }

    /// A new session (2025-11-25): its id.
    async fn session(&self) -> String {
        let reply = post(self.addr, &[], INIT_TASKS).await;
        assert_eq!(
            reply.json()["result"]["capabilities"]["tasks"]["requests"],
            json!({"tools": {"call": {}}})
        );
        reply.session()
    }

    async fn request(&self, session: &str, body: &str) -> Value {
        let headers = [(SESSION_HEADER, session), (PROTOCOL_HEADER, "2025-11-25")];
        let reply = post(self.addr, &headers, body).await;
        let body = reply.body.trim();
        // An event stream's one event, or plain JSON.
        let json = body
            .lines()
            .find_map(|line| line.strip_prefix("data: "))
            .unwrap_or(body);
        serde_json::from_str(json).unwrap_or_else(|_| panic!("not JSON: {body}"))
    }
}

fn task_call(id: u64, tool: &str) -> String {
    json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":tool,"arguments":{},"task":{}}}).to_string()
}

fn on_task(method: &str, id: u64, task: &str) -> String {
    json!({"jsonrpc":"2.0","id":id,"method":method,"params":{"taskId":task}}).to_string()
}

#[tokio::test]
async fn another_sessions_task_is_no_such_task() {
    let spinning = Arc::default();
    let server = start_tasks(&spinning).await;
    let (alice, mallory) = (server.session().await, server.session().await);
    let created = server.request(&alice, &task_call(2, "echo")).await;
    let task = created["result"]["task"]["taskId"]
        .as_str()
        .unwrap()
        .to_owned();
    let done = server
        .request(&alice, &on_task("tasks/result", 3, &task))
        .await;
    assert_eq!(done["result"]["isError"], false, "{done}");
    // Mallory knows the id (it leaked): it is an unknown task to her, word for word as
    // a random id, for every method; and her list is empty.
    for method in ["tasks/result", "tasks/get", "tasks/cancel"] {
        for id in [task.as_str(), "00000000-0000-4000-8000-000000000000"] {
            let answer = server.request(&mallory, &on_task(method, 4, id)).await;
            assert_eq!(
                answer,
                json!({"jsonrpc": "2.0", "id": 4, "error": {"code": -32602, "message": NO_SUCH_TASK}}),
                "{method} {id}"
            );
        }
    }
    let listed = server
        .request(
            &mallory,
            r#"{"jsonrpc":"2.0","id":5,"method":"tasks/list"}"#,
        )
        .await;
    assert_eq!(listed["result"], json!({"tasks": []}));
    // Alice's task is untouched.
    let got = server
        .request(&alice, &on_task("tasks/get", 6, &task))
        .await;
    assert_eq!(got["result"]["status"], "completed");
    // A deleted session's tasks are forgotten with it.
    let headers = [(SESSION_HEADER, alice.as_str())];
    send(server.addr, Method::DELETE, &headers, "").await;
    assert_eq!(server.app.sessions.tasks().counts().tasks, 0);
    server.stop().await;
}

#[tokio::test]
async fn a_task_outlives_its_clients_disconnect() {
    let spinning = Arc::default();
    let server = start_tasks(&spinning).await;
    let session = server.session().await;
    let created = server.request(&session, &task_call(2, "nap")).await;
    let task = created["result"]["task"]["taskId"]
        .as_str()
        .unwrap()
        .to_owned();
    // The client waits for the result, and goes away while it waits.
    let waiting = {
        let (addr, session, body) = (
            server.addr,
            session.clone(),
            on_task("tasks/result", 3, &task),
        );
        tokio::spawn(async move {
            let headers = [
                (SESSION_HEADER, session.as_str()),
                (PROTOCOL_HEADER, "2025-11-25"),
            ];
            post(addr, &headers, &body).await
        })
    };
    until("the wait holds a call place", || {
        server.app.counters.calls_running.load(Ordering::SeqCst) == 1
    })
    .await;
    waiting.abort();
    until("the wait is gone", || {
        server.app.counters.calls_running.load(Ordering::SeqCst) == 0
    })
    .await;
    let got = server
        .request(&session, &on_task("tasks/get", 4, &task))
        .await;
    assert_eq!(got["result"]["status"], "working", "{got}");
    // It completes all the same, and the session fetches its result.
    let done = server
        .request(&session, &on_task("tasks/result", 5, &task))
        .await;
    assert_eq!(
        done["result"]["content"],
        json!([{"type": "text", "text": "rested"}]),
        "{done}"
    );
    let got = server
        .request(&session, &on_task("tasks/get", 6, &task))
        .await;
    assert_eq!(got["result"]["status"], "completed");
    server.stop().await;
}
