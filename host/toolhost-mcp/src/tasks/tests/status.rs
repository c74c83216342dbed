//! How a task's status changes are told: 2025-11-25's `notifications/tasks/status`,
//! 2026-07-28's `notifications/tasks` through `subscriptions/listen`.

use super::*;

/// Takes what the session sends on its own; `full` makes it refuse (a client that does
/// not read).
#[derive(Default)]
struct Told {
    messages: std::sync::Mutex<Vec<Value>>,
    full: std::sync::atomic::AtomicBool,
}

impl crate::session::Outlet for Told {
    fn send(
        &self,
        message: crate::session::Message,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + '_>> {
        self.try_send(message);
        Box::pin(async {})
    }

    fn try_send(&self, message: crate::session::Message) -> bool {
        if self.full.load(Ordering::SeqCst) {
            return false;
        }
        let value = serde_json::from_slice(&message.to_bytes()).unwrap();
        self.messages.lock().unwrap().push(value);
        true
    }
}

impl Told {
    fn on(session: &Session) -> Arc<Self> {
        let told = Arc::new(Self::default());
        session.set_notifier(Notifier::new(
            Arc::clone(&told) as Arc<dyn crate::session::Outlet>
        ));
        told
    }

    fn taken(&self) -> Vec<Value> {
        std::mem::take(&mut *self.messages.lock().unwrap())
    }
}

/// Each status change of a 2025-11-25 task is told to its session, as the task is then
/// (`tasks/get`'s answer, word for word); nothing is told of a modern request's task.
#[tokio::test]
async fn status_changes_are_told_to_the_session() {
    let spinning = Arc::default();
    let registry = task_registry(&spinning);
    let store = Arc::new(TaskStore::new(&McpLimits::default()));
    let session = session_with(&registry, &store, "s");
    let told = Told::on(&session);
    let id = task_id(&start(&session, 1, "nap"));
    assert_eq!(told.taken(), Vec::<Value>::new(), "created is not a change");
    let result = answer(&session, &on_task("tasks/result", 2, &id)).await;
    assert_eq!(result["result"]["content"][0]["text"], "rested");
    let got = reply(&session, &on_task("tasks/get", 3, &id));
    assert_eq!(
        told.taken(),
        [
            json!({"jsonrpc": "2.0", "method": "notifications/tasks/status", "params": got["result"]})
        ]
    );
    // Failed, with its message; cancelled by the client.
    let failed = task_id(&start(&session, 4, "fails"));
    answer(&session, &on_task("tasks/result", 5, &failed)).await;
    let got = reply(&session, &on_task("tasks/get", 6, &failed));
    assert_eq!(got["result"]["status"], "failed");
    assert_eq!(
        told.taken(),
        [
            json!({"jsonrpc": "2.0", "method": "notifications/tasks/status", "params": got["result"]})
        ]
    );
    let spun = task_id(&start(&session, 7, "spin"));
    until("spinning", || spinning.0.load(Ordering::SeqCst) == 1).await;
    let cancelled = reply(&session, &on_task("tasks/cancel", 8, &spun));
    until("the call stopped", || {
        spinning.0.load(Ordering::SeqCst) == 0
    })
    .await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(
        told.taken(),
        [
            json!({"jsonrpc": "2.0", "method": "notifications/tasks/status", "params": cancelled["result"]})
        ],
        "told once, not again when the call winds down"
    );
    // A 2026-07-28 request's task: not told as 2025-11-25's (its extension has its
    // own way).
    let created = reply(
        &session,
        &modern(
            DECLARED,
            9,
            "tools/call",
            json!({"name": "echo", "arguments": {}}),
        ),
    );
    let modern = created_id(&created);
    until_status(&session, &modern, "completed").await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(told.taken(), Vec::<Value>::new());
}

/// A client that does not read loses the notifications, never holds up a task; and a
/// flood of status changes is cut to the session's rate.
#[tokio::test]
async fn status_notifications_are_dropped_not_waited_for_and_rate_bounded() {
    let spinning = Arc::default();
    let registry = task_registry(&spinning);
    let store = Arc::new(TaskStore::new(&limits(2000, 2000)));
    let session = session_with(&registry, &store, "s");
    let told = Told::on(&session);
    told.full.store(true, Ordering::SeqCst);
    let id = task_id(&start(&session, 1, "echo"));
    let done = tokio::time::timeout(
        Duration::from_secs(5),
        answer(&session, &on_task("tasks/result", 2, &id)),
    )
    .await
    .expect("the task ends though its client reads nothing");
    assert_eq!(done["result"]["isError"], false);
    assert_eq!(told.taken(), Vec::<Value>::new());
    told.full.store(false, Ordering::SeqCst);
    // 1,000 tasks ending at once: the burst (200, less the one the full client lost)
    // and what the rate (50/s) refilled.
    let started = std::time::Instant::now();
    let ids: Vec<String> = (0..1000)
        .map(|n| task_id(&start(&session, 10 + n, "echo")))
        .collect();
    for id in &ids {
        let done = answer(&session, &on_task("tasks/result", 2, id)).await;
        assert_eq!(done["result"]["isError"], false);
    }
    let elapsed = started.elapsed().as_secs_f64();
    let count = told.taken().len();
    let most = 200 + (elapsed * 50.0).ceil() as usize;
    assert!(
        (199..=most).contains(&count),
        "{count} told in {elapsed} s (at most {most})"
    );
}

/// The `subscriptions/listen` of `line`, running, its messages taken by the returned
/// [`Told`].
fn listening(session: &Session, line: &str) -> (Arc<Told>, tokio::task::JoinHandle<()>) {
    let Step::Listen(listen) = session.receive(parse_line(line.as_bytes())) else {
        panic!("not a subscription: {line}");
    };
    let told = Arc::new(Told::default());
    let notifier = Notifier::new(Arc::clone(&told) as Arc<dyn crate::session::Outlet>);
    let running = tokio::spawn(async move {
        listen.run(notifier).await;
    });
    (told, running)
}

/// The published extension's status notifications: a 2026-07-28 `subscriptions/listen`
/// naming `taskIds` is acknowledged with the caller's own tasks only (another owner's
/// and unknown ids are left out alike); each one's state now comes first, then each
/// change, as `notifications/tasks` with the task as `tasks/get` gives it then.
/// Another owner's task changing tells this listener nothing.
#[tokio::test]
async fn a_modern_listen_hears_of_its_own_tasks() {
    let spinning = Arc::default();
    let registry = task_registry(&spinning);
    let store = Arc::new(TaskStore::new(&McpLimits::default()));
    let owner = modern_session(&registry, &store, "a");
    let other = modern_session(&registry, &store, "b");
    let call = |session: &Session, id: u64| {
        created_id(&reply(
            session,
            &modern(
                DECLARED,
                id,
                "tools/call",
                json!({"name": "spin", "arguments": {}}),
            ),
        ))
    };
    let first = call(&owner, 1);
    let second = call(&owner, 2);
    let foreign = call(&other, 3);
    until("spinning", || spinning.0.load(Ordering::SeqCst) == 3).await;
    let unknown = "00000000-0000-4000-8000-000000000000";
    let (told, running) = listening(
        &owner,
        &modern(
            DECLARED,
            5,
            "subscriptions/listen",
            json!({"notifications": {"taskIds": [first, second, foreign, unknown, first]}}),
        ),
    );
    until("acknowledged and told", || {
        told.messages.lock().unwrap().len() == 3
    })
    .await;
    let tag = json!({"io.modelcontextprotocol/subscriptionId": 5});
    let mut got = told.taken();
    assert_eq!(
        got.remove(0),
        json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
                "params": {"_meta": tag, "notifications": {"taskIds": [first, second]}}})
    );
    let as_noted = |got: &Value| {
        let mut task = got["result"].clone();
        task.as_object_mut().unwrap().remove("resultType");
        task["_meta"] = tag.clone();
        json!({"jsonrpc": "2.0", "method": "notifications/tasks", "params": task})
    };
    let now = |id: &str| {
        as_noted(&reply(
            &owner,
            &modern(DECLARED, 6, "tasks/get", json!({"taskId": id})),
        ))
    };
    got.sort_by_key(|note| note["params"]["taskId"] != json!(first));
    assert_eq!(got, [now(&first), now(&second)]);
    reply(
        &other,
        &modern(DECLARED, 7, "tasks/cancel", json!({"taskId": foreign})),
    );
    reply(
        &owner,
        &modern(DECLARED, 8, "tasks/cancel", json!({"taskId": second})),
    );
    until("the cancel noted", || {
        !told.messages.lock().unwrap().is_empty()
    })
    .await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let cancelled = now(&second);
    assert_eq!(cancelled["params"]["status"], "cancelled");
    assert_eq!(told.taken(), [cancelled], "nothing of the other's task");
    reply(
        &owner,
        &modern(DECLARED, 9, "tasks/cancel", json!({"taskId": first})),
    );
    until("every call stopped", || {
        spinning.0.load(Ordering::SeqCst) == 0
    })
    .await;
    running.abort();
}

/// A task that asks, listened to: its question comes as `notifications/tasks` with
/// `input_required` and `inputRequests`, and its end with the result inline.
#[tokio::test]
async fn a_modern_listen_hears_a_task_ask_and_end() {
    let registry = asking_registry();
    let store = Arc::new(TaskStore::new(&McpLimits::default()));
    let session = modern_session(&registry, &store, "s");
    let id = created_id(&reply(
        &session,
        &modern(
            ASKS,
            1,
            "tools/call",
            json!({"name": "greet", "arguments": {}}),
        ),
    ));
    let (told, running) = listening(
        &session,
        &modern(
            ASKS,
            2,
            "subscriptions/listen",
            json!({"notifications": {"taskIds": [id]}}),
        ),
    );
    let heard = |status: &'static str| {
        let told = Arc::clone(&told);
        move || {
            told.messages
                .lock()
                .unwrap()
                .iter()
                .any(|note| note["params"]["status"] == status)
        }
    };
    until("told it asks", heard("input_required")).await;
    let asking = told
        .taken()
        .into_iter()
        .find(|note| note["params"]["status"] == "input_required")
        .unwrap();
    assert_eq!(asking["method"], "notifications/tasks");
    assert_eq!(
        asking["params"]["inputRequests"]["q0"]["params"]["message"],
        "Your name?"
    );
    reply(
        &session,
        &modern(
            ASKS,
            3,
            "tasks/update",
            json!({"taskId": id, "inputResponses": {"q0": {"action": "accept", "content": {"name": "Ada"}}}}),
        ),
    );
    until("told it ended", heard("completed")).await;
    let ended = told
        .taken()
        .into_iter()
        .find(|note| note["params"]["status"] == "completed")
        .unwrap();
    assert_eq!(
        ended["params"]["result"]["content"][0]["text"],
        "Hello, Ada!"
    );
    running.abort();
}

/// Hostile: a listen asking for task notifications without declaring the extension is
/// refused (-32021); one naming too many ids, or ids that are not strings, is refused
/// (-32602) before any is looked up.
#[tokio::test]
async fn modern_listens_for_tasks_are_bounded_and_need_the_extension() {
    let spinning = Arc::default();
    let registry = task_registry(&spinning);
    let store = Arc::new(TaskStore::new(&McpLimits::default()));
    let session = modern_session(&registry, &store, "s");
    let listen = |meta: &str, ids: Value| {
        reply(
            &session,
            &modern(
                meta,
                1,
                "subscriptions/listen",
                json!({"notifications": {"taskIds": ids}}),
            ),
        )
    };
    let undeclared = listen(UNDECLARED, json!(["x"]));
    assert_eq!(undeclared["error"]["code"], -32021, "{undeclared}");
    assert_eq!(
        undeclared["error"]["data"],
        json!({"requiredCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}})
    );
    let many: Vec<String> = (0..=crate::limits::MAX_LISTEN_TASKS)
        .map(|n| format!("t{n}"))
        .collect();
    let too_many = listen(DECLARED, json!(many));
    assert_eq!(too_many["error"]["code"], -32602);
    assert_eq!(
        too_many["error"]["message"],
        "Invalid params: \"notifications.taskIds\" names 257 tasks; one subscription may listen to at most 256"
    );
    for wrong in [json!("x"), json!([1]), json!({"a": "b"})] {
        let refused = listen(DECLARED, wrong.clone());
        assert_eq!(
            refused["error"]["message"],
            "Invalid params: \"notifications.taskIds\" must be an array of task ids (strings)",
            "{wrong}"
        );
    }
}
