use std::io::{Read, Write};

use serde_json::Value;
use toolhost::registry::{
    CallContext, CallObserver, Environment, Registry, ToolCall, ToolDefinition, ToolResult,
};

use super::*;
use crate::observe::Observers;

fn measured() -> (Registry, Arc<Metrics>) {
    let registry = Registry::new();
    registry
        .register(
            ToolDefinition::new(
                "needs",
                "Needs x.",
                serde_json::json!({"type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"]}),
            ),
            |_ctx: CallContext, _args: toolhost::registry::Arguments, _env: Environment| async move {
                Ok(ToolResult::new(Value::from("ok")))
            },
        )
        .unwrap();
    let metrics = Arc::new(Metrics::default());
    let observers = Observers {
        audit: None,
        metrics: Some(Arc::clone(&metrics)),
        tracer: None,
    };
    registry
        .set_observer(Arc::new(observers) as Arc<dyn CallObserver>)
        .unwrap();
    (registry, metrics)
}

async fn call(registry: &Registry, tool: &str, arguments: &str) {
    let _ = registry
        .dispatch(
            &CallContext::new(),
            &ToolCall::new(tool, arguments),
            &Environment::default(),
        )
        .await;
}

fn lines(text: &str, prefix: &str) -> Vec<String> {
    text.lines()
        .filter(|line| line.starts_with(prefix))
        .map(str::to_owned)
        .collect()
}

#[tokio::test]
async fn counts_calls_by_tool_and_outcome_exactly() {
    let (registry, metrics) = measured();
    for _ in 0..7 {
        call(&registry, "needs", r#"{"x":"a"}"#).await;
    }
    for _ in 0..3 {
        call(&registry, "needs", "{}").await;
    }
    // Unknown names (one trying to break out of its label) collapse to one label value.
    call(&registry, "nope", "{}").await;
    call(&registry, "x\"} 1\nforged_metric{a=\"", "{}").await;
    let text = metrics.render();
    assert_eq!(
        lines(&text, "toolhost_tool_calls_total{"),
        [
            r#"toolhost_tool_calls_total{tool="_unknown",outcome="refused"} 2"#,
            r#"toolhost_tool_calls_total{tool="needs",outcome="ok"} 7"#,
            r#"toolhost_tool_calls_total{tool="needs",outcome="refused"} 3"#,
        ]
    );
    assert!(!text.contains("forged_metric"), "{text}");
    // Only calls that ran are timed.
    assert_eq!(
        lines(&text, "toolhost_tool_call_duration_seconds_count"),
        [
            r#"toolhost_tool_call_duration_seconds_count{tool="_unknown"} 0"#,
            r#"toolhost_tool_call_duration_seconds_count{tool="needs"} 7"#,
        ]
    );
    assert_eq!(
        lines(
            &text,
            r#"toolhost_tool_call_duration_seconds_bucket{tool="needs",le="+Inf"}"#
        ),
        [r#"toolhost_tool_call_duration_seconds_bucket{tool="needs",le="+Inf"} 7"#]
    );
    assert_eq!(
        lines(&text, "toolhost_tool_calls_in_flight "),
        ["toolhost_tool_calls_in_flight 0"]
    );
    // Every line is a comment or `name{labels} value`.
    for line in text.lines() {
        assert!(
            line.starts_with("# HELP ")
                || line.starts_with("# TYPE ")
                || line.starts_with("toolhost_"),
            "{line}"
        );
    }
}

#[test]
fn tool_labels_are_bounded() {
    let metrics = Metrics::default();
    for n in 0..MAX_TOOL_LABELS + 50 {
        metrics.stats(&format!("t{n}"));
    }
    assert_eq!(metrics.tools.read().unwrap().len(), MAX_TOOL_LABELS + 1);
    assert!(metrics.tools.read().unwrap().contains_key(OTHER_TOOL));
}

#[test]
fn label_values_are_escaped() {
    assert_eq!(escape_label("a\"b\\c\nd"), r#"a\"b\\c\nd"#);
}

fn scrape(addr: SocketAddr, request: &str) -> String {
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    response
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serves_scrapes_and_sheds_a_flood_of_idle_connections() {
    let (registry, metrics) = measured();
    call(&registry, "needs", r#"{"x":"a"}"#).await;
    let listener = bind(SocketAddr::from(([127, 0, 0, 1], 0))).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(serve(listener, Arc::clone(&metrics)));
    let response = tokio::task::spawn_blocking(move || {
        let ok = scrape(addr, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        let missing = scrape(addr, "GET /other HTTP/1.1\r\n\r\n");
        let post = scrape(addr, "POST /metrics HTTP/1.1\r\n\r\n");
        let huge = scrape(
            addr,
            &format!("GET /metrics HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(9_000)),
        );
        (ok, missing, post, huge)
    })
    .await
    .unwrap();
    assert!(
        response.0.starts_with("HTTP/1.1 200 OK\r\n"),
        "{}",
        response.0
    );
    assert!(response.0.contains("text/plain; version=0.0.4"));
    assert!(response
        .0
        .contains(r#"toolhost_tool_calls_total{tool="needs",outcome="ok"} 1"#));
    assert!(response.1.starts_with("HTTP/1.1 404 "), "{}", response.1);
    assert!(response.2.starts_with("HTTP/1.1 405 "), "{}", response.2);
    assert!(response.3.starts_with("HTTP/1.1 431 "), "{}", response.3);

    // A flood: connections that send nothing hold every scrape slot; one more is closed
    // at once (not queued), and once they go, scrapes are served again.
    let idle: Vec<_> = (0..MAX_SCRAPES)
        .map(|_| std::net::TcpStream::connect(addr).unwrap())
        .collect();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let shed = tokio::task::spawn_blocking(move || {
        let mut stream = std::net::TcpStream::connect(addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(2)))
            .unwrap();
        let mut buf = [0u8; 16];
        stream.read(&mut buf)
    })
    .await
    .unwrap();
    assert_eq!(shed.unwrap(), 0, "closed at once, no answer");
    drop(idle);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let again = tokio::task::spawn_blocking(move || scrape(addr, "GET /metrics HTTP/1.0\r\n\r\n"))
        .await
        .unwrap();
    assert!(again.starts_with("HTTP/1.1 200 OK\r\n"), "{again}");
    server.abort();
}

#[tokio::test]
async fn a_dropped_call_leaves_no_call_in_flight() {
    let (registry, metrics) = measured();
    registry
        .register(
            ToolDefinition::new(
                "forever",
                "Never ends.",
                serde_json::json!({"type": "object", "properties": {}}),
            ),
            |_ctx: CallContext, _args: toolhost::registry::Arguments, _env: Environment| async move {
                tokio::time::sleep(Duration::from_secs(3600)).await;
                Ok(ToolResult::new(Value::from("late")))
            },
        )
        .unwrap();
    let running = tokio::time::timeout(Duration::from_millis(50), call(&registry, "forever", "{}"));
    assert!(running.await.is_err());
    let text = metrics.render();
    assert_eq!(
        lines(&text, "toolhost_tool_calls_in_flight "),
        ["toolhost_tool_calls_in_flight 0"]
    );
    assert_eq!(
        lines(&text, "toolhost_tool_calls_total{"),
        [r#"toolhost_tool_calls_total{tool="forever",outcome="cancelled"} 1"#]
    );
}

#[test]
fn plugin_http_requests_are_counted_by_plugin_and_status_class() {
    use toolhost_plugin::http_policy::{HttpObserver, HttpOutcome};
    let metrics = Metrics::default();
    for outcome in [
        HttpOutcome::Status(200),
        HttpOutcome::Status(204),
        HttpOutcome::Status(503),
        HttpOutcome::Refused,
    ] {
        metrics.request("webfetch", outcome);
    }
    metrics.request("we\"ird\nname", HttpOutcome::Failed);
    let text = metrics.render();
    let lines: Vec<&str> = text
        .lines()
        .filter(|line| line.starts_with("toolhost_plugin_http_requests_total{"))
        .collect();
    assert_eq!(
        lines,
        [
            r#"toolhost_plugin_http_requests_total{plugin="we\"ird\nname",status="error"} 1"#,
            r#"toolhost_plugin_http_requests_total{plugin="webfetch",status="2xx"} 2"#,
            r#"toolhost_plugin_http_requests_total{plugin="webfetch",status="5xx"} 1"#,
            r#"toolhost_plugin_http_requests_total{plugin="webfetch",status="refused"} 1"#,
        ]
    );
    assert!(text.contains("# TYPE toolhost_plugin_http_requests_total counter\n"));
}

#[test]
fn tasks_created_and_ended_are_shown_by_status() {
    let metrics = Metrics::default();
    metrics.set_server(ServerFigures(Box::new(|| ServerGauges {
        sessions: 2,
        tasks_created: 7,
        tasks_ended: [3, 2, 1],
        ..ServerGauges::default()
    })));
    let text = metrics.render();
    let lines: Vec<&str> = text
        .lines()
        .filter(|line| line.starts_with("toolhost_tasks_"))
        .collect();
    assert_eq!(
        lines,
        [
            "toolhost_tasks_created_total 7",
            r#"toolhost_tasks_ended_total{status="completed"} 3"#,
            r#"toolhost_tasks_ended_total{status="failed"} 2"#,
            r#"toolhost_tasks_ended_total{status="cancelled"} 1"#,
        ]
    );
    assert!(text.contains("# TYPE toolhost_tasks_ended_total counter\n"));
}

#[test]
fn http_refusals_are_shown_by_status_over_http_only() {
    let metrics = Metrics::default();
    metrics.set_server(ServerFigures(Box::new(|| ServerGauges {
        connections: Some(1),
        http_refusals: [5, 4, 3, 0],
        ..ServerGauges::default()
    })));
    let text = metrics.render();
    let lines: Vec<&str> = text
        .lines()
        .filter(|line| line.starts_with("toolhost_http_refusals_total"))
        .collect();
    assert_eq!(
        lines,
        [
            r#"toolhost_http_refusals_total{status="401"} 5"#,
            r#"toolhost_http_refusals_total{status="403"} 4"#,
            r#"toolhost_http_refusals_total{status="429"} 3"#,
            r#"toolhost_http_refusals_total{status="503"} 0"#,
        ]
    );
    // Over stdio there is no HTTP to refuse.
    let metrics = Metrics::default();
    metrics.set_server(ServerFigures(Box::new(ServerGauges::default)));
    assert!(!metrics.render().contains("toolhost_http_refusals_total"));
}

#[test]
fn the_plugin_pool_is_shown_when_there_are_plugins() {
    let metrics = Metrics::default();
    metrics.set_server(ServerFigures(Box::new(|| ServerGauges {
        sessions: 1,
        pool: Some((3, 2, 8)),
        ..ServerGauges::default()
    })));
    let text = metrics.render();
    for line in [
        "\ntoolhost_plugin_calls_running 3\n",
        "\ntoolhost_plugin_call_places 8\n",
        "\ntoolhost_plugin_instances_idle 2\n",
        "\n# TYPE toolhost_plugin_calls_running gauge\n",
    ] {
        assert!(text.contains(line), "{line:?} in {text}");
    }
    let without = Metrics::default();
    without.set_server(ServerFigures(Box::new(ServerGauges::default)));
    assert!(!without.render().contains("toolhost_plugin_calls_running"));
}
