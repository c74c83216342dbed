//! Tasks over HTTP: each session sees only its own, and a task outlives the requests
//! of its client (`owners`); a task's status and questions reach its client (`told`).

use super::*;
use crate::tasks::tests::{task_registry, Spinning};
use crate::tasks::{NO_SUCH_TASK, NO_SUCH_TASK_PUBLISHED};

const INIT_TASKS: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;

struct TaskServer {
    addr: SocketAddr,
    app: Arc<App>,
    stop: oneshot::Sender<()>,
    done: tokio::task::JoinHandle<Result<(), HttpError>>,
}

async fn start_tasks(spinning: &Arc<Spinning>) -> TaskServer {
    start_tasks_with(stateful(), spinning).await
}

async fn start_tasks_with(config: HttpConfig, spinning: &Arc<Spinning>) -> TaskServer {
    let server = HttpServer::bind(
        "127.0.0.1:0".parse().unwrap(),
        config,
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

/// The `_meta` of a 2026-07-28 request from a client declaring the tasks extension.
fn modern_meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}},
    })
}

/// A 2026-07-28 request without a session, with `token` (none: no Authorization), its
/// mirrored headers set: the JSON answer.
async fn modern_request(
    addr: SocketAddr,
    token: Option<&str>,
    method: &str,
    params: Value,
) -> Value {
    modern_request_with(addr, token, method, params, modern_meta()).await
}

/// [`modern_request`] with `meta` as the request's `_meta`.
async fn modern_request_with(
    addr: SocketAddr,
    token: Option<&str>,
    method: &str,
    mut params: Value,
    meta: Value,
) -> Value {
    params["_meta"] = meta;
    // Mcp-Name mirrors the tool's name, or (the tasks extension) the task's id.
    let name = match method {
        "tools/call" => params["name"].as_str(),
        "tasks/get" | "tasks/update" | "tasks/cancel" => params["taskId"].as_str(),
        _ => None,
    }
    .map(str::to_owned);
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params}).to_string();
    let bearer = token.map(|token| format!("Bearer {token}"));
    let mut headers = vec![(PROTOCOL_HEADER, "2026-07-28"), ("mcp-method", method)];
    if let Some(name) = &name {
        headers.push(("mcp-name", name.as_str()));
    }
    if let Some(bearer) = &bearer {
        headers.push(("authorization", bearer.as_str()));
    }
    let reply = post(addr, &headers, &body).await;
    let body = reply.body.trim();
    let json = body
        .lines()
        .find_map(|line| line.strip_prefix("data: "))
        .unwrap_or(body);
    serde_json::from_str(json).unwrap_or_else(|_| panic!("not JSON ({}): {body}", reply.status))
}

/// A legacy (2025-11-25) request to a stateless server, with `token`.
async fn stateless_request(addr: SocketAddr, token: &str, body: &str) -> Value {
    let bearer = format!("Bearer {token}");
    let headers = [
        (PROTOCOL_HEADER, "2025-11-25"),
        ("authorization", bearer.as_str()),
    ];
    let reply = post(addr, &headers, body).await;
    let body = reply.body.trim();
    let json = body
        .lines()
        .find_map(|line| line.strip_prefix("data: "))
        .unwrap_or(body);
    serde_json::from_str(json).unwrap_or_else(|_| panic!("not JSON ({}): {body}", reply.status))
}

fn no_such_task_for(id: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32602, "message": NO_SUCH_TASK}})
}

/// The published extension's answer to a task id that is not the caller's.
fn no_such_published_task_for(id: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32602, "message": NO_SUCH_TASK_PUBLISHED}})
}

/// The task id of a published extension's `CreateTaskResult` (`resultType: "task"`).
/// `tasks/get` of `task` (2026-07-28) with `token`: the answer.
async fn get(addr: SocketAddr, token: &str, task: &str) -> Value {
    modern_request(addr, Some(token), "tasks/get", json!({"taskId": task})).await
}

/// Calls `tool` (no arguments) with `token` (2026-07-28, tasks declared): the id of
/// the task it became.
async fn start_task(addr: SocketAddr, token: &str, tool: &str) -> String {
    let params = json!({"name": tool, "arguments": {}});
    created_id(&modern_request(addr, Some(token), "tools/call", params).await)
}

fn created_id(created: &Value) -> String {
    assert_eq!(created["result"]["resultType"], "task", "{created}");
    assert_eq!(created["result"]["status"], "working", "{created}");
    created["result"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("not a task: {created}"))
        .to_owned()
}

mod owners;
mod shared;
mod told;
