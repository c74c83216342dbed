//! Calls-per-minute quotas counted across servers (`--state`): two servers sharing one
//! counter hold a principal to its limit together, not each; a counter that cannot
//! count refuses the limited principal's calls (503, fail closed) while an unlimited
//! principal's calls go on; batched calls count as calls alone do.

use super::*;
use crate::policy::{LivePolicy, Policy, SharedQuotas};
use crate::state::{BoxFuture, Counted, MemoryBackend, QuotaCounter, StateError};

/// alice: 3 calls a minute; bob: no quota.
const POLICY: &str = "[[principal]]\ntoken = \"alice\"\nprofile = \"limited\"\n\n[profile.limited]\nquota = { calls_per_minute = 3 }\n\n[profile.default]\n";

fn limited(counter: Arc<dyn QuotaCounter>) -> HttpConfig {
    let live = LivePolicy::new(Policy::parse(POLICY).unwrap());
    assert!(live.quotas().share(SharedQuotas::new(counter)));
    HttpConfig::new(None)
        .with_tokens(Some(tokens()))
        .with_policy(Arc::new(live))
}

async fn call_as(addr: SocketAddr, token: &str, id: u64) -> Reply {
    let bearer = format!("Bearer {token}");
    post(
        addr,
        &[
            ("authorization", &bearer),
            ("mcp-protocol-version", "2025-06-18"),
        ],
        &call(id, "greet"),
    )
    .await
}

#[tokio::test]
async fn a_principals_calls_per_minute_hold_across_servers_sharing_a_counter() {
    let counter: Arc<dyn QuotaCounter> = Arc::new(MemoryBackend::new(1 << 20));
    let probe: Arc<Probe> = Arc::default();
    let a = start(limited(Arc::clone(&counter)), &probe).await;
    let b = start(limited(Arc::clone(&counter)), &probe).await;
    // Three calls of alice's minute, taking turns between the servers: all served.
    for (id, addr) in [(1, a.addr), (2, b.addr), (3, a.addr)] {
        let reply = call_as(addr, TOKEN_A, id).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
        assert_eq!(reply.json()["result"]["content"][0]["text"], "Hello, you!");
    }
    // The fourth is refused by either, though B has seen only one of them.
    for (id, addr) in [(4, b.addr), (5, a.addr)] {
        let reply = call_as(addr, TOKEN_A, id).await;
        assert_eq!(
            reply.status,
            StatusCode::TOO_MANY_REQUESTS,
            "{}",
            reply.body
        );
        let secs: u64 = reply.header("retry-after").unwrap().parse().unwrap();
        assert!((1..=60).contains(&secs), "{secs}");
        let message = reply.json()["error"]["message"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(
            message.starts_with(
                "Too Many Requests: quota exceeded: calls_per_minute (limit 3) is used up for this principal; it resets in "
            ),
            "{message}"
        );
    }
    // bob has no quota: served by both.
    for addr in [a.addr, b.addr] {
        assert_eq!(call_as(addr, TOKEN_B, 6).await.status, StatusCode::OK);
    }
    a.stop().await;
    b.stop().await;
}

#[tokio::test]
async fn batched_calls_count_against_the_shared_quota_one_by_one() {
    let counter: Arc<dyn QuotaCounter> = Arc::new(MemoryBackend::new(1 << 20));
    let probe: Arc<Probe> = Arc::default();
    let a = start(limited(Arc::clone(&counter)), &probe).await;
    let b = start(limited(Arc::clone(&counter)), &probe).await;
    assert_eq!(call_as(a.addr, TOKEN_A, 1).await.status, StatusCode::OK);
    // A 2025-03-26 batch of three calls on B: two fit in alice's minute, one does not.
    let bearer = format!("Bearer {TOKEN_A}");
    let batch = format!(
        "[{},{},{}]",
        call(11, "greet"),
        call(12, "greet"),
        call(13, "greet")
    );
    let reply = post(
        b.addr,
        &[
            ("authorization", &bearer),
            ("mcp-protocol-version", "2025-03-26"),
        ],
        &batch,
    )
    .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    let answers = reply.json();
    let answers = answers.as_array().unwrap();
    let served = answers
        .iter()
        .filter(|a| a["result"]["content"][0]["text"] == "Hello, you!")
        .count();
    let refused: Vec<&Value> = answers
        .iter()
        .filter(|a| a["error"]["code"] == -32029)
        .collect();
    assert_eq!((served, refused.len()), (2, 1), "{answers:?}");
    assert_eq!(refused[0]["error"]["data"]["quota"], "calls_per_minute");
    assert_eq!(refused[0]["error"]["data"]["limit"], 3);
    a.stop().await;
    b.stop().await;
}

/// A counter that cannot count, as Redis when it went away.
#[derive(Debug)]
struct Lost;

impl QuotaCounter for Lost {
    fn count<'a>(
        &'a self,
        _: &'a str,
        _: u64,
        _: u64,
        _: Duration,
    ) -> BoxFuture<'a, Result<Counted, StateError>> {
        Box::pin(async { Err(StateError::Unreachable("connection refused".into())) })
    }
}

#[tokio::test]
async fn a_counter_that_cannot_count_refuses_limited_calls_and_lets_the_rest_through() {
    let probe: Arc<Probe> = Arc::default();
    let server = start(limited(Arc::new(Lost)), &probe).await;
    let refused = call_as(server.addr, TOKEN_A, 1).await;
    assert_eq!(
        refused.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        refused.body
    );
    assert_eq!(refused.header("retry-after"), Some("1"));
    let message = refused.json()["error"]["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        message.starts_with("Service Unavailable: the quota state server cannot count this principal's quota now (the task state server is unreachable (connection refused)"),
        "{message}"
    );
    assert!(
        message.contains("calls under a quota are refused until it is back"),
        "{message}"
    );
    // bob has no quota: the counter is never asked.
    let served = call_as(server.addr, TOKEN_B, 2).await;
    assert_eq!(served.status, StatusCode::OK, "{}", served.body);
    // Methods that run no tool are not counted.
    let bearer = format!("Bearer {TOKEN_A}");
    let listed = post(
        server.addr,
        &[
            ("authorization", &bearer),
            ("mcp-protocol-version", "2025-06-18"),
        ],
        LIST,
    )
    .await;
    assert_eq!(listed.status, StatusCode::OK, "{}", listed.body);
    server.stop().await;
}
