//! The sampler decides at a call's start: a call it drops gets no record (its handler
//! records nothing) unless the audit log needs its files and hosts.

use super::*;
use crate::audit::AuditLog;

/// What `touch` answered: whether its call carried a record.
async fn touched(registry: &Registry, parent: Option<&str>) -> String {
    let answer = call_with(registry, "touch", "1", parent, CallContext::new())
        .await
        .unwrap();
    answer.content.as_str().unwrap().to_owned()
}

#[tokio::test]
async fn a_sampled_out_call_without_audit_records_nothing() {
    let unsampled = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00";
    for (sampler, parent) in [
        (Sampler::parse("always_off", None).unwrap(), None),
        (Sampler::parse("always_off", None).unwrap(), Some(PARENT)),
        (Sampler::DEFAULT, Some(unsampled)),
        (Sampler::parse("traceidratio", Some("0")).unwrap(), None),
        (
            Sampler::parse("parentbased_always_off", None).unwrap(),
            None,
        ),
    ] {
        let (url, bodies) = collector(Answer::Ok);
        let (registry, observers) = traced(&url, sampler, 64);
        assert_eq!(
            touched(&registry, parent).await,
            "unrecorded",
            "{sampler:?} {parent:?}"
        );
        tracer(&observers).flush(Duration::from_secs(2));
        assert!(bodies.recv_timeout(Duration::from_millis(300)).is_err());
    }
    // The same tool, sampled, records its steps and they are exported.
    let (url, bodies) = collector(Answer::Ok);
    let (registry, _observers) = traced(&url, Sampler::DEFAULT, 64);
    assert_eq!(touched(&registry, Some(PARENT)).await, "recorded");
    assert_eq!(received(&bodies, 7).1.len(), 7);
}

#[tokio::test]
async fn an_audited_sampled_out_call_still_lists_its_files_and_hosts() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let audit = AuditLog::open(&path, None, 1, false).unwrap();
    let (url, bodies) = collector(Answer::Ok);
    let off = Sampler::parse("always_off", None).unwrap();
    let (registry, observers) = traced_audited(&url, off, 64, Some(audit));
    assert_eq!(touched(&registry, Some(PARENT)).await, "recorded");
    let audit = observers.audit.as_ref().unwrap();
    assert!(audit.flush(Duration::from_secs(10)));
    let text = std::fs::read_to_string(&path).unwrap();
    let record: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(record["tool"], "touch");
    assert_eq!(record["files_read"], serde_json::json!(["notes/a.md"]));
    assert_eq!(record["hosts"], serde_json::json!(["127.0.0.1:8080"]));
    // Audited, not traced: no span is sent.
    tracer(&observers).flush(Duration::from_secs(2));
    assert!(bodies.recv_timeout(Duration::from_millis(300)).is_err());
}
