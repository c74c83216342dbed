use std::sync::Arc;
use std::time::Duration;

use super::quota::Quotas;
use super::*;

const TWO: &str = r#"
[[principal]]
token = "alice"
profile = "editor"

[[principal]]
scope = "tools:read"
profile = "reader"

[[principal]]
sub = "user-7"
profile = "editor"

[profile.editor]
tools = ["read_file", "write_file"]
plugins = ["greet"]
root = "/srv/{client}"
quota = { calls_per_minute = 2, concurrent_calls = 1, bytes_written_per_day = 10 }

[profile.reader]
files = "read-only"
plugin = { http = ["api.example.org"], memory_bytes = 1048576, timeout_ms = 500, config = ["wiki.lang"] }
"#;

fn scopes(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

#[test]
fn principals_map_to_profiles_first_match_in_file_order() {
    let policy = Policy::parse(TWO).unwrap();
    let of = |client: Option<&str>, granted: &[&str]| {
        let granted = scopes(granted);
        policy
            .profile_for(&Principal::new(client, &granted))
            .map(|p| p.name().to_owned())
    };
    assert_eq!(of(Some("alice"), &[]).as_deref(), Some("editor"));
    // alice's own rule comes first, whatever her scopes.
    assert_eq!(
        of(Some("alice"), &["tools:read"]).as_deref(),
        Some("editor")
    );
    assert_eq!(of(Some("bob"), &["tools:read"]).as_deref(), Some("reader"));
    // The scope rule comes before user-7's own rule.
    assert_eq!(
        of(Some("user-7"), &["x", "tools:read"]).as_deref(),
        Some("reader")
    );
    assert_eq!(of(Some("user-7"), &[]).as_deref(), Some("editor"));
    // A scope is matched whole, not as a prefix.
    assert_eq!(of(Some("bob"), &["tools:rea", "tools:read:all"]), None);
    assert_eq!(of(None, &[]), None, "no default profile: refused");
    let with_default =
        Policy::parse(&format!("{TWO}\n[profile.default]\nfiles = \"none\"\n")).unwrap();
    assert_eq!(
        with_default
            .profile_for(&Principal::new(Some("carol"), &[]))
            .unwrap()
            .name(),
        "default"
    );
}

#[test]
fn a_profile_offers_only_what_it_names() {
    let policy = Policy::parse(TWO).unwrap();
    let editor = policy.profile("editor").unwrap();
    assert!(editor.offers("read_file", ToolKind::File { writes: false }));
    assert!(editor.offers("write_file", ToolKind::File { writes: true }));
    assert!(!editor.offers("delete_file", ToolKind::File { writes: true }));
    assert!(editor.offers("greet", ToolKind::Plugin("greet")));
    assert!(!editor.offers("divide", ToolKind::Plugin("divide")));
    assert!(!editor.offers("todo_write", ToolKind::Other));
    let reader = policy.profile("reader").unwrap();
    assert!(reader.offers("read_file", ToolKind::File { writes: false }));
    assert!(!reader.offers("write_file", ToolKind::File { writes: true }));
    assert!(
        reader.offers("divide", ToolKind::Plugin("divide")),
        "no list: every plugin"
    );
    assert_eq!(reader.plugin().timeout, Some(Duration::from_millis(500)));
    assert_eq!(reader.plugin().memory_bytes, Some(1 << 20));
    assert_eq!(editor.root(), Some("/srv/{client}"));
    assert_eq!(editor.quota().calls_per_minute, Some(2));
    let none = Policy::parse("[profile.x]\nfiles = \"none\"").unwrap();
    assert!(!none
        .profile("x")
        .unwrap()
        .offers("read_file", ToolKind::File { writes: false }));
}

fn err(text: &str) -> String {
    Policy::parse(text).unwrap_err().to_string()
}

#[test]
fn a_broken_policy_is_refused_naming_the_line() {
    assert_eq!(
        err("[profile.a]\nfiles = \"read-only\"\ntols = [\"x\"]\n"),
        "policy line 3: unknown field `tols`, expected one of `tools`, `plugins`, `files`, `root`, `plugin`, `quota`"
    );
    assert!(err("[profile.a]\n\nfiles = \n").starts_with("policy line 3: "));
    assert_eq!(
        err("[[principal]]\ntoken = \"a\"\nprofile = \"nope\"\n[profile.a]\n"),
        "policy principal 1: it maps to the profile \"nope\", which the policy does not define; define [profile.nope] or name one of: a"
    );
    assert_eq!(
        err("[[principal]]\ntoken = \"a\"\nscope = \"s\"\nprofile = \"a\"\n[profile.a]\n"),
        "policy principal 1: give exactly one of token = \"NAME\", sub = \"SUBJECT\" or scope = \"SCOPE\""
    );
    assert_eq!(
        err("[profile.a]\nfiles = \"write-only\"\n"),
        "policy profile.a.files: \"write-only\" is not a file access; write \"none\", \"read-only\" or \"read-write\""
    );
    assert_eq!(
        err(""),
        "policy profile: the policy names no profile; add at least one [profile.NAME] table"
    );
}

#[test]
fn huge_and_negative_numbers_are_refused() {
    assert_eq!(
        err("[profile.a]\nquota = { calls_per_minute = 1000001 }\n"),
        "policy profile.a.quota.calls_per_minute: 1000001 is out of bounds; give a whole number from 1 to 1000000, or leave it out for no limit"
    );
    assert_eq!(
        err("[profile.a]\nquota = { concurrent_calls = -1 }\n"),
        "policy profile.a.quota.concurrent_calls: -1 is out of bounds; give a whole number from 1 to 65536, or leave it out for no limit"
    );
    assert!(err("[profile.a]\nquota = { concurrent_calls = 0 }\n").contains("0 is out of bounds"));
    // Past what TOML's integers hold: a syntax error on its line.
    assert!(
        err("[profile.a]\nquota = { bytes_written_per_day = 99999999999999999999999 }\n")
            .starts_with("policy line 2: "),
    );
    assert!(
        err("[profile.a]\nplugin = { memory_bytes = 9223372036854775807 }\n")
            .contains("is out of bounds; give a whole number from 65536 to 4294967296")
    );
}

#[test]
fn an_oversized_policy_is_refused_unread() {
    let big = format!("[profile.a]\n#{}\n", "x".repeat(MAX_POLICY_BYTES as usize));
    assert_eq!(
        Policy::parse(&big).unwrap_err(),
        PolicyError::TooLarge {
            got: big.len() as u64
        }
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("policy.toml");
    std::fs::write(&path, &big).unwrap();
    assert_eq!(
        Policy::read(&path).unwrap_err(),
        PolicyError::TooLarge {
            got: MAX_POLICY_BYTES + 1
        }
    );
    std::fs::write(&path, TWO).unwrap();
    assert!(Policy::read(&path).is_ok());
}

#[test]
fn unknown_tools_and_plugins_are_named() {
    let policy = Policy::parse(TWO).unwrap();
    assert_eq!(
        policy
            .check_names(&["read_file", "write_file", "greet"], &["greet"])
            .map_err(|e| e.to_string()),
        Ok(())
    );
    assert_eq!(
        policy.check_names(&["read_file", "greet"], &["greet"]).unwrap_err().to_string(),
        "policy profile.editor.tools: no tool is named \"write_file\"; the server has: read_file, greet"
    );
    assert_eq!(
        policy
            .check_names(&["read_file", "write_file"], &[])
            .unwrap_err()
            .to_string(),
        "policy profile.editor.plugins: no plugin is named \"greet\"; the server has: none"
    );
}

#[test]
fn a_nested_call_takes_a_calls_token_but_runs_in_its_callers_place() {
    let policy = Policy::parse(TWO).unwrap();
    let live = LivePolicy::new(policy);
    let (_, alice) = live.admit(&Principal::new(Some("alice"), &[])).unwrap();
    // One call at a time, two a minute: the code tool's call and one nested call.
    let code_tool = alice.begin_call().unwrap();
    alice.begin_nested_call().unwrap();
    assert_eq!(alice.running(), 1);
    let over = alice.begin_nested_call().unwrap_err();
    assert_eq!(over.quota, Quota::CallsPerMinute);
    drop(code_tool);
    assert_eq!(alice.running(), 0);
}

#[test]
fn quotas_refuse_naming_the_quota_and_when_it_resets() {
    let policy = Policy::parse(TWO).unwrap();
    let live = LivePolicy::new(policy);
    let (_, alice) = live.admit(&Principal::new(Some("alice"), &[])).unwrap();
    let first = alice.begin_call().unwrap();
    // One at a time.
    let refused = alice.begin_call().unwrap_err();
    assert_eq!(refused.quota, Quota::ConcurrentCalls);
    assert_eq!(
        alice.check_call().unwrap_err().quota,
        Quota::ConcurrentCalls
    );
    drop(first);
    assert_eq!(alice.running(), 0, "a refused call gives its place back");
    drop(alice.begin_call().unwrap());
    // Two a minute: the third waits about 30 s.
    let over = alice.begin_call().unwrap_err();
    assert_eq!(over.quota, Quota::CallsPerMinute);
    assert_eq!(over.limit, 2);
    assert!((29..=30).contains(&over.retry_after_secs()), "{over:?}");
    assert_eq!(
        over.to_string(),
        format!(
            "quota exceeded: calls_per_minute (limit 2) is used up for this principal; it resets in {} s",
            over.retry_after_secs()
        )
    );
    // Another principal of the same profile has quotas of its own.
    let (_, user7) = live.admit(&Principal::new(Some("user-7"), &[])).unwrap();
    assert!(!Arc::ptr_eq(&alice, &user7));
    assert!(user7.begin_call().is_ok());
    // Bytes written: all or nothing.
    alice.charge_written(6).unwrap();
    let over = alice.charge_written(5).unwrap_err();
    assert_eq!(over.quota, Quota::BytesWrittenPerDay);
    alice.charge_written(4).unwrap();
    assert!(alice.charge_written(1).is_err());
    assert!(over.retry_after <= Duration::from_secs(86_400));
    // Refused principal.
    assert_eq!(
        live.admit(&Principal::new(Some("mallory"), &[]))
            .unwrap_err(),
        PolicyRefusal::NoProfile {
            principal: "mallory".into()
        }
    );
}

#[test]
fn a_reload_changes_every_known_principals_limits() {
    let live = LivePolicy::new(Policy::parse(TWO).unwrap());
    let reader_scopes = scopes(&["tools:read"]);
    let (_, bob) = live
        .admit(&Principal::new(Some("bob"), &reader_scopes))
        .unwrap();
    for _ in 0..100 {
        bob.begin_call().unwrap();
    }
    live.replace(
        Policy::parse(
            "[[principal]]\nscope = \"tools:read\"\nprofile = \"r\"\n[profile.r]\nquota = { http_requests_per_minute = 1 }\n",
        )
        .unwrap(),
    );
    bob.take_http_request().unwrap();
    assert_eq!(
        bob.take_http_request().unwrap_err().quota,
        Quota::HttpRequestsPerMinute
    );
    assert_eq!(live.current().profiles().count(), 1);
}

#[test]
fn the_quota_map_is_sharded_by_principal() {
    let quotas = Quotas::default();
    let limits = QuotaLimits {
        calls_per_minute: Some(1),
        ..QuotaLimits::default()
    };
    let (a, b) = (
        Principal::new(Some("a"), &[]),
        Principal::new(Some("b"), &[]),
    );
    let a_state = quotas.principal(&a, &limits).unwrap();
    assert!(Arc::ptr_eq(
        &a_state,
        &quotas.principal(&a, &QuotaLimits::default()).unwrap()
    ));
    a_state.begin_call().unwrap();
    assert!(a_state.begin_call().is_err());
    assert!(quotas.principal(&b, &limits).unwrap().begin_call().is_ok());
}

#[test]
fn a_reload_that_drops_a_principal_refuses_it_at_once_and_back_again() {
    let live = LivePolicy::new(Policy::parse(TWO).unwrap());
    let alice = Principal::new(Some("alice"), &[]);
    let known = live.quota_of(&alice).unwrap();
    assert!(
        Arc::ptr_eq(&known, &live.quota_of(&alice).unwrap()),
        "found again, not made"
    );
    live.replace(Policy::parse("[profile.other]\n").unwrap());
    assert_eq!(
        live.quota_of(&alice).unwrap_err(),
        PolicyRefusal::NoProfile {
            principal: "alice".into()
        }
    );
    live.replace(Policy::parse(TWO).unwrap());
    let back = live.quota_of(&alice).unwrap();
    assert!(
        Arc::ptr_eq(&known, &back),
        "the same state: usage so far still counts"
    );
    // Its limits are the profile's again (2 calls a minute).
    drop(back.begin_call().unwrap());
    drop(back.begin_call().unwrap());
    assert_eq!(back.begin_call().unwrap_err().quota, Quota::CallsPerMinute);
}

fn one_a_minute() -> QuotaLimits {
    QuotaLimits {
        calls_per_minute: Some(1),
        ..QuotaLimits::default()
    }
}

#[test]
fn the_same_sub_from_two_issuers_has_two_sets_of_quotas() {
    // Keyed by the sub alone, the second issuer's user-7 found the first one's bucket
    // empty: one tenant's user spent another's quota.
    let live = LivePolicy::new(
        Policy::parse("[profile.default]\nquota = { calls_per_minute = 1 }\n").unwrap(),
    );
    let granted = scopes(&["tools:read"]);
    let at_a = Principal::new(Some("user-7"), &granted).with_issuer(Some("https://a.example"));
    let at_b = Principal::new(Some("user-7"), &granted).with_issuer(Some("https://b.example"));
    let static_token = Principal::new(Some("user-7"), &[]);
    drop(live.quota_of(&at_a).unwrap().begin_call().unwrap());
    assert_eq!(
        live.quota_of(&at_a)
            .unwrap()
            .begin_call()
            .unwrap_err()
            .quota,
        Quota::CallsPerMinute
    );
    assert!(live.quota_of(&at_b).unwrap().begin_call().is_ok());
    assert!(live.quota_of(&static_token).unwrap().begin_call().is_ok());
    assert_eq!(live.quotas().len(), 3);
    // A reload finds each one's profile again by its issuer, sub and scopes.
    live.replace(
        Policy::parse("[[principal]]\nscope = \"tools:read\"\nprofile = \"r\"\n[profile.r]\nquota = { calls_per_minute = 5 }\n").unwrap(),
    );
    assert!(live.quota_of(&at_a).is_ok());
    assert!(live.quota_of(&static_token).is_err());
}

#[test]
fn ten_thousand_subjects_keep_the_quota_map_bounded() {
    let quotas = Quotas::with_max(1_600);
    let issuer = Some("https://issuer.example");
    let now = std::time::Instant::now();
    let mut refused = 0;
    for i in 0..10_000 {
        let sub = format!("sub-{i}");
        let principal = Principal::new(Some(&sub), &[]).with_issuer(issuer);
        match quotas.principal_at(&principal, &one_a_minute(), now) {
            // Each one within its window: kept.
            Ok(state) => drop(state.begin_call().unwrap()),
            Err(full) => {
                assert_eq!(full, quota::QuotasFull { max: 1_600 });
                refused += 1;
            }
        }
        assert!(quotas.len() <= 1_600, "{} states after {i}", quotas.len());
    }
    assert_eq!(quotas.len() + refused, 10_000);
    assert!(refused >= 10_000 - 1_600, "{refused} refused");
    assert_eq!(
        quota::QuotasFull { max: 1_600 }.to_string(),
        "Service Unavailable: the server keeps the quotas of at most 1600 principals and all of them are within their quota windows; retry in 60 s, when idle ones can be dropped"
    );
    // Two minutes on, every bucket is full again (one token a minute): the idle
    // states make room.
    let later = now + Duration::from_secs(120);
    for i in 10_000..20_000 {
        let sub = format!("sub-{i}");
        let principal = Principal::new(Some(&sub), &[]).with_issuer(issuer);
        let state = quotas
            .principal_at(&principal, &QuotaLimits::default(), later)
            .unwrap();
        drop(state);
        assert!(quotas.len() <= 1_600, "{} states after {i}", quotas.len());
    }
}

#[test]
fn churning_other_subjects_never_resets_a_principal_within_its_window() {
    let quotas = Quotas::with_max(160);
    let victim = Principal::new(Some("spender"), &[]).with_issuer(Some("https://i.example"));
    let state = quotas.principal(&victim, &one_a_minute()).unwrap();
    drop(state.begin_call().unwrap());
    drop(state);
    // Ten thousand others with no quotas (idle at once), ten seconds on: the map is
    // swept again and again, but the spender's bucket is still empty.
    let soon = std::time::Instant::now() + Duration::from_secs(10);
    for i in 0..10_000 {
        let sub = format!("churn-{i}");
        let principal = Principal::new(Some(&sub), &[]).with_issuer(Some("https://i.example"));
        drop(
            quotas
                .principal_at(&principal, &QuotaLimits::default(), soon)
                .unwrap(),
        );
    }
    assert!(quotas.len() <= 160);
    let again = quotas.principal(&victim, &one_a_minute()).unwrap();
    assert_eq!(again.begin_call().unwrap_err().quota, Quota::CallsPerMinute);
    // A state someone holds (a session) is kept whatever its buckets.
    let held = Principal::new(Some("held"), &[]);
    let session = quotas.principal(&held, &QuotaLimits::default()).unwrap();
    let later = std::time::Instant::now() + Duration::from_secs(120);
    for i in 0..1_000 {
        let sub = format!("late-{i}");
        let principal = Principal::new(Some(&sub), &[]);
        drop(
            quotas
                .principal_at(&principal, &QuotaLimits::default(), later)
                .unwrap(),
        );
    }
    assert!(Arc::ptr_eq(
        &session,
        &quotas.principal(&held, &QuotaLimits::default()).unwrap()
    ));
}

/// A counter that records the keys it is asked about, counting in memory.
#[derive(Debug, Default)]
struct Recording {
    keys: std::sync::Mutex<Vec<String>>,
    counter: Option<crate::state::MemoryBackend>,
}

impl crate::state::QuotaCounter for Recording {
    fn count<'a>(
        &'a self,
        key: &'a str,
        amount: u64,
        limit: u64,
        window: Duration,
    ) -> crate::state::BoxFuture<'a, Result<crate::state::Counted, crate::state::StateError>> {
        self.keys.lock().unwrap().push(key.to_owned());
        Box::pin(async move {
            match &self.counter {
                Some(counter) => counter.count(key, amount, limit, window).await,
                None => Err(crate::state::StateError::Timeout(Duration::from_secs(2))),
            }
        })
    }
}

#[tokio::test]
async fn quotas_shared_by_two_processes_hold_together_under_hashed_keys() {
    let counter = Arc::new(Recording {
        counter: Some(crate::state::MemoryBackend::new(64)),
        ..Recording::default()
    });
    // Two processes: each its own policy and quota states, one counter.
    let one = LivePolicy::new(Policy::parse(TWO).unwrap());
    let two = LivePolicy::new(Policy::parse(TWO).unwrap());
    for live in [&one, &two] {
        assert!(live.quotas().share(SharedQuotas::new(
            Arc::clone(&counter) as Arc<dyn crate::state::QuotaCounter>
        )));
        assert!(!live
            .quotas()
            .share(SharedQuotas::new(Arc::new(Recording::default()))));
    }
    let alice = Principal::new(Some("alice"), &[]);
    let (_, at_one) = one.admit(&alice).unwrap();
    let (_, at_two) = two.admit(&alice).unwrap();
    // Bytes written per day (10): 6 through one, then 5 through two is too many (not
    // counted), 4 fits.
    at_one.charge_written_shared(6).await.unwrap();
    let over = at_two.charge_written_shared(5).await.unwrap_err();
    let SharedRefusal::Exceeded(over) = over else {
        panic!("{over:?}")
    };
    assert_eq!((over.quota, over.limit), (Quota::BytesWrittenPerDay, 10));
    at_two.charge_written_shared(4).await.unwrap();
    assert!(at_one.charge_written_shared(1).await.is_err());
    // Calls per minute (2), counted by both.
    at_one.count_shared_call().await.unwrap();
    at_two.count_shared_call().await.unwrap();
    let SharedRefusal::Exceeded(over) = at_one.count_shared_call().await.unwrap_err() else {
        panic!("a third call")
    };
    assert_eq!((over.quota, over.limit), (Quota::CallsPerMinute, 2));
    // The counter never saw the principal's name: a hash, and the quota's name.
    let keys = counter.keys.lock().unwrap().clone();
    assert_eq!(keys.len(), 7);
    for key in &keys {
        assert!(!key.contains("alice"), "{key}");
        let (hash, quota) = key.split_once(':').unwrap();
        assert_eq!(hash.len(), 32, "{key}");
        assert!(hash.bytes().all(|b| b.is_ascii_hexdigit()), "{key}");
        assert!(
            ["calls_per_minute", "bytes_written_per_day"].contains(&quota),
            "{key}"
        );
    }
    // A principal without those quotas never reaches the counter.
    let scopes = ["tools:read".to_owned()];
    let (_, reader) = one.admit(&Principal::new(Some("bob"), &scopes)).unwrap();
    reader.count_shared_call().await.unwrap();
    reader.charge_written_shared(1_000).await.unwrap();
    assert_eq!(counter.keys.lock().unwrap().len(), 7);
}

#[tokio::test]
async fn a_shared_counter_that_cannot_count_refuses_limited_principals_only() {
    let live = LivePolicy::new(Policy::parse(TWO).unwrap());
    live.quotas()
        .share(SharedQuotas::new(Arc::new(Recording::default())));
    let (_, alice) = live.admit(&Principal::new(Some("alice"), &[])).unwrap();
    let refused = alice.count_shared_call().await.unwrap_err();
    assert!(
        matches!(refused, SharedRefusal::Unavailable(_)),
        "{refused:?}"
    );
    assert!(
        refused
            .to_string()
            .starts_with("the quota state server cannot count this principal's quota now ("),
        "{refused}"
    );
    assert!(matches!(
        alice.charge_written_shared(1).await,
        Err(SharedRefusal::Unavailable(_))
    ));
    // The reader profile has no quota: never refused, the counter never asked.
    let scopes = ["tools:read".to_owned()];
    let (_, reader) = live.admit(&Principal::new(Some("bob"), &scopes)).unwrap();
    reader.count_shared_call().await.unwrap();
    reader.charge_written_shared(1_000).await.unwrap();
}

#[tokio::test]
async fn outgoing_http_requests_are_counted_across_processes_and_fail_closed() {
    let policy = TWO.replace(
        "bytes_written_per_day = 10 }",
        "bytes_written_per_day = 10, http_requests_per_minute = 3 }",
    );
    let counter = Arc::new(Recording {
        counter: Some(crate::state::MemoryBackend::new(64)),
        ..Recording::default()
    });
    let one = LivePolicy::new(Policy::parse(&policy).unwrap());
    let two = LivePolicy::new(Policy::parse(&policy).unwrap());
    for live in [&one, &two] {
        assert!(live.quotas().share(SharedQuotas::new(
            Arc::clone(&counter) as Arc<dyn crate::state::QuotaCounter>
        )));
    }
    let alice = Principal::new(Some("alice"), &[]);
    let (_, at_one) = one.admit(&alice).unwrap();
    let (_, at_two) = two.admit(&alice).unwrap();
    assert!(at_one.shares_http_requests() && at_two.shares_http_requests());
    // 3 a minute across both: two through one, one through two, then none anywhere,
    // though each process's own bucket (3) still has requests left.
    at_one.count_shared_http_request().await.unwrap();
    at_two.count_shared_http_request().await.unwrap();
    at_one.count_shared_http_request().await.unwrap();
    for process in [&at_two, &at_one] {
        let SharedRefusal::Exceeded(over) = process.count_shared_http_request().await.unwrap_err()
        else {
            panic!("a fourth request")
        };
        assert_eq!((over.quota, over.limit), (Quota::HttpRequestsPerMinute, 3));
        assert!(over.retry_after <= Duration::from_secs(60), "{over:?}");
    }
    at_two.take_http_request().unwrap();
    let keys = counter.keys.lock().unwrap().clone();
    assert_eq!(keys.len(), 5);
    assert!(keys
        .iter()
        .all(|key| key.ends_with(":http_requests_per_minute") && !key.contains("alice")));
    // A principal without that quota never reaches the counter.
    let (_, reader) = one
        .admit(&Principal::new(Some("bob"), &scopes(&["tools:read"])))
        .unwrap();
    assert!(!reader.shares_http_requests());
    reader.count_shared_http_request().await.unwrap();
    assert_eq!(counter.keys.lock().unwrap().len(), 5);
    // A counter that cannot count: the limited principal's requests refused.
    let lost = LivePolicy::new(Policy::parse(&policy).unwrap());
    lost.quotas()
        .share(SharedQuotas::new(Arc::new(Recording::default())));
    let (_, cut_off) = lost.admit(&alice).unwrap();
    let refused = cut_off.count_shared_http_request().await.unwrap_err();
    assert!(
        matches!(refused, SharedRefusal::Unavailable(_)),
        "{refused:?}"
    );
    // Without a shared counter: nothing to await.
    let alone = LivePolicy::new(Policy::parse(&policy).unwrap());
    let (_, local) = alone.admit(&alice).unwrap();
    assert!(!local.shares_http_requests());
}
