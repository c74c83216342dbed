//! The export under a failing collector, and the configuration and samplers.

use super::*;

#[tokio::test]
async fn a_hanging_collector_neither_slows_calls_nor_blocks_them_and_drops_are_counted() {
    let (url, _bodies) = collector(Answer::Hang);
    let (registry, observers) = traced(&url, Sampler::DEFAULT, 16);
    let calls = 5000;
    let started = Instant::now();
    for n in 0..calls {
        call(&registry, "greet", &n.to_string(), None).await;
    }
    // 5,000 calls in-process take milliseconds; a call that waited for the export
    // (5 s timeouts) would take far longer.
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    let tracer = tracer(&observers);
    // The queue holds 16, the exporter's batch at most 512: all others are dropped.
    assert!(tracer.dropped() >= calls - 16 - 512, "{}", tracer.dropped());
    assert_eq!(tracer.exported(), 0);
    // The metrics show the same count.
    let metrics = crate::metrics::Metrics::default();
    metrics.count_dropped_spans(tracer.dropped_counter());
    let line = format!("toolhost_trace_spans_dropped_total {}\n", tracer.dropped());
    assert!(metrics.render().contains(&line), "{}", metrics.render());
}

#[tokio::test]
async fn a_collector_answering_500_is_a_counted_failure_and_calls_go_on() {
    let (url, bodies) = collector(Answer::Status500);
    let (registry, observers) = traced(&url, Sampler::DEFAULT, 64);
    call(&registry, "greet", "1", None).await;
    let (_, spans, _) = received(&bodies, 3);
    assert_eq!(spans.len(), 3);
    let tracer = tracer(&observers);
    tracer.flush(Duration::from_secs(5));
    assert_eq!(tracer.failures(), 1);
    assert_eq!(tracer.exported(), 0);
    call(&registry, "greet", "2", None).await;
    assert_eq!(received(&bodies, 3).1.len(), 3);
}

#[test]
fn the_configuration_comes_from_the_flag_and_the_otel_variables() {
    let none = |_: &str| None;
    assert_eq!(TraceConfig::from_env(None, none, "pipe"), Ok(None));
    let env = |vars: &'static [(&'static str, &'static str)]| {
        move |name: &str| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
        }
    };
    let base = TraceConfig::from_env(
        None,
        env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318/")]),
        "tcp",
    )
    .unwrap()
    .unwrap();
    assert_eq!(
        (base.authority.as_str(), base.path.as_str()),
        ("127.0.0.1:4318", "/v1/traces")
    );
    assert_eq!(base.service_name, "wasm-toolhost");
    assert_eq!(base.sampler, Sampler::DEFAULT);
    let traces = TraceConfig::from_env(
        None,
        env(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318"),
            (
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                "http://[::1]/custom/traces",
            ),
            ("OTEL_RESOURCE_ATTRIBUTES", "service.name=from-resource,a=b"),
            ("OTEL_TRACES_SAMPLER", "parentbased_traceidratio"),
            ("OTEL_TRACES_SAMPLER_ARG", "0.5"),
        ]),
        "tcp",
    )
    .unwrap()
    .unwrap();
    assert_eq!(
        (traces.authority.as_str(), traces.path.as_str()),
        ("[::1]:80", "/custom/traces")
    );
    assert_eq!(traces.service_name, "from-resource");
    assert_eq!(traces.resource, [("a".to_owned(), "b".to_owned())]);
    let flag = TraceConfig::from_env(
        Some("http://localhost:9999"),
        env(&[("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://127.0.0.1:1/x")]),
        "pipe",
    )
    .unwrap()
    .unwrap();
    assert_eq!(
        (flag.authority.as_str(), flag.path.as_str()),
        ("localhost:9999", "/v1/traces")
    );
    assert_eq!(
        TraceConfig::from_env(
            None,
            env(&[
                ("OTEL_SDK_DISABLED", "true"),
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
            ]),
            "pipe"
        ),
        Ok(None)
    );
    let https = TraceConfig::from_env(Some("https://collector:4318"), none, "pipe").unwrap_err();
    assert!(https.contains("https is not supported"), "{https}");
    let query =
        TraceConfig::from_env(Some("http://127.0.0.1:4318/v1?x=1"), none, "pipe").unwrap_err();
    assert!(query.contains("without user, query or fragment"), "{query}");
    let sampler = TraceConfig::from_env(
        Some("http://127.0.0.1:4318"),
        env(&[("OTEL_TRACES_SAMPLER", "sometimes")]),
        "pipe",
    )
    .unwrap_err();
    assert!(
        sampler.contains("\"sometimes\" is not a sampler"),
        "{sampler}"
    );
    let grpc = TraceConfig::from_env(
        Some("http://127.0.0.1:4317"),
        env(&[("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")]),
        "pipe",
    )
    .unwrap_err();
    assert!(grpc.contains("\"grpc\" is not supported"), "{grpc}");
    assert!(TraceConfig::from_env(
        Some("http://127.0.0.1:4318"),
        env(&[("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf")]),
        "pipe",
    )
    .unwrap()
    .is_some());
    let ratio = Sampler::parse("traceidratio", Some("1.5")).unwrap_err();
    assert!(ratio.contains("outside 0..1"), "{ratio}");
}

#[test]
fn samplers_decide_by_parent_and_ratio() {
    let sampled = TraceParent::parse(PARENT).unwrap();
    let unsampled = TraceParent {
        flags: 0,
        ..sampled
    };
    let low = [0u8; 16];
    let high = [0xffu8; 16];
    let on = Sampler::parse("always_on", None).unwrap();
    assert!(on.sampled(&low, Some(&unsampled)));
    let parent_on = Sampler::parse("parentbased_always_on", None).unwrap();
    assert!(!parent_on.sampled(&low, Some(&unsampled)));
    assert!(parent_on.sampled(&low, None));
    let parent_off = Sampler::parse("parentbased_always_off", None).unwrap();
    assert!(parent_off.sampled(&low, Some(&sampled)));
    assert!(!parent_off.sampled(&low, None));
    let half = Sampler::parse("traceidratio", Some("0.5")).unwrap();
    assert!(half.sampled(&low, None));
    assert!(!half.sampled(&high, None));
    let none = Sampler::parse("traceidratio", Some("0")).unwrap();
    assert!(!none.sampled(&low, None));
}
