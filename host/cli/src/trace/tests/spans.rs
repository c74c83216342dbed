//! What a call's spans hold: names, attributes, parents, events, cut texts, sampling.

use super::*;

#[tokio::test]
async fn a_calls_span_has_the_mcp_attributes_and_the_clients_parent() {
    let (url, bodies) = collector(Answer::Ok);
    let (registry, observers) = traced(&url, Sampler::DEFAULT, 64);
    call(&registry, "greet", "7", Some(PARENT)).await;
    call(&registry, "hog", r#""req-8""#, None).await;
    let (resource, all_spans, raw) = received(&bodies, 6);
    assert_eq!(all_spans.len(), 6, "{all_spans:?}");
    let (spans, children): (Vec<&Span>, Vec<&Span>) = all_spans.iter().partition(|s| s.kind == 2);
    let (checks, children): (Vec<&Span>, Vec<&Span>) = children
        .into_iter()
        .partition(|s| s.name == "tool.arguments.check");
    assert!(resource.contains(&("service.name".to_owned(), Value::from("toolhost-test"))));
    assert!(resource.contains(&("deployment.environment".to_owned(), Value::from("ci"))));
    assert!(resource.contains(&("team".to_owned(), Value::from("tools"))));

    let greet = spans[0];
    let parent = TraceParent::parse(PARENT).unwrap();
    assert_eq!(greet.name, "tools/call greet");
    assert_eq!(greet.kind, 2, "SERVER");
    assert_eq!(greet.trace_id, parent.trace_id);
    assert_eq!(greet.parent.as_deref(), Some(&parent.span_id[..]));
    assert_eq!(greet.span_id.len(), 8);
    assert_ne!(greet.span_id, parent.span_id);
    assert!(greet.start <= greet.end && greet.start > 0);
    assert_eq!(greet.status_code, None);
    for (key, value) in [
        ("mcp.method.name", "tools/call"),
        ("gen_ai.tool.name", "greet"),
        ("gen_ai.operation.name", "execute_tool"),
        ("mcp.session.id", "session-1"),
        ("jsonrpc.request.id", "7"),
        ("network.transport", "pipe"),
        ("toolhost.outcome", "ok"),
    ] {
        assert_eq!(greet.attr(key), Some(&Value::from(value)), "{key}");
    }
    assert_eq!(greet.attr("error.type"), None);
    assert!(greet.events.is_empty());

    let hog = spans[1];
    assert_eq!(hog.name, "tools/call hog");
    assert_eq!(hog.parent, None, "no traceparent: a root span");
    assert_eq!(hog.trace_id.len(), 16);
    assert_ne!(hog.trace_id, greet.trace_id);
    assert_eq!(hog.attr("jsonrpc.request.id"), Some(&Value::from("req-8")));
    assert_eq!(hog.attr("error.type"), Some(&Value::from("memory")));
    assert_eq!(hog.status_code, Some(2), "ERROR");
    assert_eq!(
        hog.events,
        [(
            "toolhost.limit_exceeded".to_owned(),
            vec![
                ("toolhost.limit".to_owned(), Value::from("memory")),
                ("toolhost.limit.value".to_owned(), Value::from(1 << 20)),
            ]
        )]
    );
    // The handler's run is a child of each: INTERNAL, within its parent.
    for (child, parent) in children.iter().zip([greet, hog]) {
        assert_eq!(child.kind, 1, "INTERNAL");
        assert_eq!(
            child.name,
            parent.name.replace("tools/call", "execute_tool")
        );
        assert_eq!(child.trace_id, parent.trace_id);
        assert_eq!(child.parent.as_deref(), Some(&parent.span_id[..]));
        assert!(
            parent.start <= child.start && child.end <= parent.end,
            "{child:?} {parent:?}"
        );
        assert_eq!(child.status_code, parent.status_code);
        assert_eq!(
            child.attr("gen_ai.tool.name"),
            parent.attr("gen_ai.tool.name")
        );
    }
    // The arguments' check is a child of each call's span, before its handler's.
    for ((check, handler), parent) in checks.iter().zip(&children).zip([greet, hog]) {
        assert_eq!(check.kind, 1, "INTERNAL");
        assert_eq!(check.parent.as_deref(), Some(&parent.span_id[..]));
        assert!(parent.start <= check.start && check.end <= handler.start);
        assert_eq!(
            check.attr("toolhost.arguments.valid"),
            Some(&Value::from(true))
        );
        assert_eq!(check.attr("error.type"), None);
        assert_eq!(check.status_code, None);
    }
    // Neither the arguments nor the error's text are sent.
    for body in raw {
        let text = String::from_utf8_lossy(&body);
        assert!(!text.contains("s3cret"), "{text}");
        assert!(!text.contains("grew past"), "{text}");
    }
    assert_eq!(tracer(&observers).dropped(), 0);
}

/// What a plugin call did through the host is exported as the handler's descendants:
/// `plugin.instantiate` and `plugin.call` under `execute_tool`, the file read and the
/// HTTP request (a CLIENT span) under the guest call, each with its attributes, within
/// its parent's time.
#[tokio::test]
async fn a_plugin_calls_file_read_and_request_are_child_spans_of_its_guest_call() {
    let (url, bodies) = collector(Answer::Ok);
    let (registry, observers) = traced(&url, Sampler::DEFAULT, 64);
    call(&registry, "touch", "3", Some(PARENT)).await;
    let (_, spans, _) = received(&bodies, 7);
    assert_eq!(spans.len(), 7, "{spans:?}");
    let named = |name: &str| {
        spans
            .iter()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("no span {name}: {spans:?}"))
    };
    let server = named("tools/call touch");
    let handler = named("execute_tool touch");
    let instantiate = named("plugin.instantiate touch");
    let guest = named("plugin.call touch");
    let read = named("files.read");
    let get = named("GET");
    let check = named("tool.arguments.check");
    let ids: std::collections::HashSet<&Vec<u8>> = spans.iter().map(|s| &s.span_id).collect();
    assert_eq!(ids.len(), 7, "distinct span ids");
    for (child, parent) in [
        (check, server),
        (handler, server),
        (instantiate, handler),
        (guest, handler),
        (read, guest),
        (get, guest),
    ] {
        assert_eq!(
            child.parent.as_deref(),
            Some(&parent.span_id[..]),
            "{}",
            child.name
        );
        assert_eq!(child.trace_id, server.trace_id);
        assert!(
            parent.start <= child.start && child.start <= child.end && child.end <= parent.end,
            "{child:?} within {parent:?}"
        );
    }
    assert_eq!(
        (instantiate.kind, guest.kind, read.kind, get.kind),
        (1, 1, 1, 3)
    );
    assert_eq!(read.attr("file.path"), Some(&Value::from("notes/a.md")));
    assert_eq!(read.attr("toolhost.file.bytes"), Some(&Value::from(12)));
    assert_eq!(read.status_code, None);
    for (key, value) in [
        ("http.request.method", Value::from("GET")),
        ("server.address", Value::from("127.0.0.1")),
        ("server.port", Value::from(8080)),
        ("url.full", Value::from("http://127.0.0.1:8080/page")),
        ("http.response.status_code", Value::from(200)),
        ("http.response.body.size", Value::from(5)),
    ] {
        assert_eq!(get.attr(key), Some(&value), "{key}");
    }
    assert_eq!(tracer(&observers).dropped(), 0);
}

#[tokio::test]
async fn a_malformed_or_huge_traceparent_gives_a_root_span_and_the_call_runs() {
    let (url, bodies) = collector(Answer::Ok);
    let (registry, _observers) = traced(&url, Sampler::DEFAULT, 64);
    let huge = format!("{PARENT}{}", "0".repeat(1 << 20));
    call(&registry, "greet", "1", Some(&huge)).await;
    call(
        &registry,
        "greet",
        "2",
        Some("00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"),
    )
    .await;
    let (_, spans, _) = received(&bodies, 6);
    assert_eq!(spans.len(), 6);
    for span in spans.iter().filter(|s| s.kind == 2) {
        assert_eq!(span.parent, None);
        assert_ne!(span.trace_id, TraceParent::parse(PARENT).unwrap().trace_id);
        assert_eq!(span.attr("toolhost.outcome"), Some(&Value::from("ok")));
    }
}

#[tokio::test]
async fn a_10_kb_tool_name_from_the_model_is_cut() {
    let (url, bodies) = collector(Answer::Ok);
    let (registry, _observers) = traced(&url, Sampler::DEFAULT, 64);
    let name = "é".repeat(5 * 1024);
    let id = format!("\"{}\"", "9".repeat(10 * 1024));
    call(&registry, &name, &id, None).await;
    let (_, spans, raw) = received(&bodies, 1);
    let span = &spans[0];
    let cut_name = "é".repeat(MAX_ATTRIBUTE_BYTES / 2);
    assert_eq!(
        span.attr("gen_ai.tool.name"),
        Some(&Value::from(cut_name.as_str()))
    );
    assert_eq!(span.name, format!("tools/call {cut_name}"));
    assert_eq!(
        span.attr("jsonrpc.request.id"),
        Some(&Value::from("9".repeat(MAX_ATTRIBUTE_BYTES)))
    );
    assert_eq!(span.attr("error.type"), Some(&Value::from("refused")));
    assert!(raw[0].len() < 4096, "{} bytes", raw[0].len());
}

#[tokio::test]
async fn an_unsampled_parent_or_always_off_sends_nothing() {
    let (url, bodies) = collector(Answer::Ok);
    let (registry, observers) = traced(&url, Sampler::DEFAULT, 64);
    call(
        &registry,
        "greet",
        "1",
        Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"),
    )
    .await;
    let (off_url, off_bodies) = collector(Answer::Ok);
    let off = Sampler::parse("always_off", None).unwrap();
    let (off_registry, off_observers) = traced(&off_url, off, 64);
    call(&off_registry, "greet", "1", Some(PARENT)).await;
    // A sampled call after them shows the exporter ran.
    call(&registry, "greet", "2", Some(PARENT)).await;
    let (_, spans, _) = received(&bodies, 3);
    assert_eq!(
        spans.len(),
        3,
        "the sampled call, its check's and its handler's child"
    );
    assert_eq!(spans[2].attr("jsonrpc.request.id"), Some(&Value::from("2")));
    tracer(&off_observers).flush(Duration::from_secs(2));
    assert!(off_bodies.recv_timeout(Duration::from_millis(500)).is_err());
    assert_eq!(tracer(&observers).dropped(), 0);
}

/// A call refused by its arguments' check: the check's span says so (`error.type`
/// `invalid_arguments`, status ERROR, valid false), the call's span is `refused`, and
/// no handler span follows.
#[tokio::test]
async fn a_refused_calls_argument_check_span_carries_the_error() {
    let (url, bodies) = collector(Answer::Ok);
    let (registry, _observers) = traced(&url, Sampler::DEFAULT, 64);
    // `need` requires `path`; the call sends only `token`.
    call(&registry, "need", "4", Some(PARENT)).await;
    let (_, spans, raw) = received(&bodies, 2);
    assert_eq!(spans.len(), 2, "{spans:?}");
    let (check, server) = (&spans[0], &spans[1]);
    assert_eq!(server.name, "tools/call need");
    assert_eq!(server.attr("error.type"), Some(&Value::from("refused")));
    assert_eq!(check.name, "tool.arguments.check");
    assert_eq!(check.parent.as_deref(), Some(&server.span_id[..]));
    assert_eq!(check.trace_id, server.trace_id);
    assert_eq!(
        check.attr("toolhost.arguments.valid"),
        Some(&Value::from(false))
    );
    assert_eq!(
        check.attr("error.type"),
        Some(&Value::from("invalid_arguments"))
    );
    assert_eq!(check.status_code, Some(2), "ERROR");
    assert!(server.start <= check.start && check.end <= server.end);
    // The refusal's text (which names the field) is not sent, nor the arguments.
    let text = String::from_utf8_lossy(&raw[0]);
    assert!(
        !text.contains("is required") && !text.contains("s3cret"),
        "{text}"
    );
}

/// A call stopped by its time limit: an event `toolhost.limit_exceeded` on its span
/// names the limit (`timeout`) and its value (the limit in milliseconds).
#[tokio::test]
async fn a_timeout_is_an_event_with_the_limit_and_its_value() {
    let (url, bodies) = collector(Answer::Ok);
    let (registry, _observers) = traced(&url, Sampler::DEFAULT, 64);
    let ctx = CallContext::new().with_time_limit(Duration::from_millis(10));
    let err = call_with(&registry, "slow", "5", None, ctx)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), "timed_out");
    let (_, spans, _) = received(&bodies, 3);
    let server = spans.iter().find(|s| s.kind == 2).unwrap();
    assert_eq!(server.attr("error.type"), Some(&Value::from("timeout")));
    assert_eq!(
        server.events,
        [(
            "toolhost.limit_exceeded".to_owned(),
            vec![
                ("toolhost.limit".to_owned(), Value::from("timeout")),
                ("toolhost.limit.value".to_owned(), Value::from(10)),
            ]
        )]
    );
}
