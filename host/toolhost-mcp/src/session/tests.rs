use std::future::Future;
use std::num::NonZeroUsize;
use std::pin::Pin;

use toolhost::registry::{Arguments, CallContext, ToolDefinition, ToolResult};

use super::limiter::Busy;
use super::*;
use crate::jsonrpc::parse_line;
use crate::limits::McpLimits;

fn session() -> Session {
    let registry = Registry::new();
    registry
        .register(
            ToolDefinition::new("echo", "Echo.", serde_json::json!({"type": "object"})),
            |_ctx: CallContext, args: Arguments, _env: Environment| async move {
                Ok(ToolResult::new(args.raw().to_owned()))
            },
        )
        .unwrap();
    Session::new(
        Arc::new(registry),
        Environment {
            session_id: "s".into(),
            turn_id: String::new(),
        },
    )
}

fn call(session: &Session, id: &str) -> PendingCall {
    let line = format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"echo","arguments":{{"a":1}}}}}}"#
    );
    match session.receive(parse_line(line.as_bytes())) {
        Step::Call(call) => call,
        other => panic!("{other:?}"),
    }
}

fn cancel(session: &Session, id: &str) {
    let line = format!(
        r#"{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{{"requestId":{id}}}}}"#
    );
    assert!(matches!(
        session.receive(parse_line(line.as_bytes())),
        Step::Nothing
    ));
}

#[test]
fn steps_for_each_kind_of_message() {
    let session = session();
    assert_eq!(session.protocol(), None);
    let Step::Reply(reply) = session.receive(parse_line(
        br#"{"jsonrpc":"2.0","id":"i","method":"initialize","params":{"protocolVersion":"2025-06-18"}}"#,
    )) else {
        panic!()
    };
    let reply: Value = serde_json::from_slice(&reply.to_bytes()).unwrap();
    assert_eq!(reply["result"]["protocolVersion"], "2025-06-18");
    assert_eq!(session.protocol(), Some("2025-06-18"));
    assert!(matches!(
        session.receive(parse_line(
            br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#
        )),
        Step::Nothing
    ));
    assert!(matches!(
        session.receive(parse_line(br#"{"jsonrpc":"2.0","id":5,"result":{}}"#)),
        Step::Nothing
    ));
    let Step::Reply(reply) = session.receive(parse_line(b"nope")) else {
        panic!()
    };
    assert!(reply.to_bytes().starts_with(br#"{"error":{"code":-32700"#));
    let call = call(&session, "7");
    assert_eq!(
        (call.id().as_json(), call.tool(), call.held_bytes()),
        // The arguments `{"a":1}`, the name, the id twice (as sent, and as its key).
        ("7", "echo", 7 + 4 + 2)
    );
    assert_eq!(session.calls_in_flight(), 1);
    drop(call);
    assert_eq!(
        session.calls_in_flight(),
        0,
        "a dropped call leaves no entry"
    );
}

#[tokio::test]
async fn a_call_runs_to_its_answer() {
    let session = session();
    let limiter = CallLimiter::new(&McpLimits::default());
    let call = call(&session, r#""x""#);
    let slot = limiter.try_acquire(call.held_bytes()).unwrap();
    let reply = call.run(&slot, Notifier::none()).await.unwrap();
    assert_eq!(
        reply.to_bytes(),
        r#"{"id":"x","jsonrpc":"2.0","result":{"content":[{"text":"{\"a\":1}","type":"text"}],"isError":false}}"#
    );
    assert_eq!(session.calls_in_flight(), 0);
}

#[tokio::test]
async fn a_finished_call_never_unregisters_a_later_one_with_its_id() {
    let session = session();
    let first = call(&session, "1");
    let second = call(&session, "1");
    drop(first);
    assert_eq!(session.calls_in_flight(), 1);
    let token = second.cancellation();
    cancel(&session, "1");
    assert!(
        token.is_cancelled(),
        "the later call is still found by its id"
    );
    let slot = CallLimiter::new(&McpLimits::default())
        .try_acquire(0)
        .unwrap();
    assert_eq!(second.run(&slot, Notifier::none()).await, None);
}

#[test]
fn closing_the_session_cancels_its_calls() {
    let session = session();
    let pending = call(&session, "3");
    let token = pending.cancellation();
    assert!(!token.is_cancelled() && !session.is_closed());
    session.close();
    assert!(token.is_cancelled() && session.is_closed());
}

#[test]
fn try_acquire_refuses_over_either_limit() {
    let limits = McpLimits {
        max_in_flight: NonZeroUsize::new(2).unwrap(),
        max_in_flight_bytes: NonZeroUsize::new(100).unwrap(),
        ..McpLimits::default()
    };
    let limiter = CallLimiter::new(&limits);
    let a = limiter.try_acquire(60).unwrap();
    assert_eq!(
        limiter.try_acquire(60).unwrap_err(),
        Busy::Bytes {
            limit: 100,
            wanted: 60
        }
    );
    let b = limiter.try_acquire(40).unwrap();
    assert_eq!(
        limiter.try_acquire(0).unwrap_err(),
        Busy::Calls { limit: 2 }
    );
    drop((a, b));
    // Larger than the whole budget: alone, it goes.
    let _c = limiter.try_acquire(1000).unwrap();
}

struct Collect(Mutex<Vec<Bytes>>);

impl Outlet for Collect {
    fn send(&self, message: Message) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        self.0.lock().unwrap().push(message.to_bytes());
        Box::pin(async {})
    }
}

#[tokio::test]
async fn notifiers_send_through_their_outlet_or_nowhere() {
    let outlet = Arc::new(Collect(Mutex::new(Vec::new())));
    let session = session();
    assert!(!session.notifier().is_connected());
    session.notifier().notify("x", None).await;
    session.set_notifier(Notifier::new(Arc::clone(&outlet) as Arc<dyn Outlet>));
    session
        .notifier()
        .notify(
            "notifications/tools/list_changed",
            Some(&serde_json::json!({})),
        )
        .await;
    assert_eq!(
        *outlet.0.lock().unwrap(),
        [Bytes::from_static(
            br#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{}}"#
        )]
    );
}
