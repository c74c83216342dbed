//! End to end: `host run --otlp-endpoint URL` exports a span per call under the client's
//! `traceparent`, and a plugin's outgoing request carries the call's trace unless
//! `--no-trace-propagation`.

use serde_json::json;

use std::time::Duration;

use super::{contains, otlp_receiver, traceparent_server, webfetch_granted};
use crate::mcp::Server;

#[test]
fn host_run_exports_a_span_per_call_parented_by_the_clients_traceparent() {
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("a.txt"), "hello").unwrap();
    let (url, bodies) = otlp_receiver();
    let mut server = Server::start(root.path(), &["--otlp-endpoint", &url]);
    server.drain_stderr();
    let init = server.request(
        1,
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}),
    );
    assert!(init["result"].is_object(), "{init}");
    let parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let reply = server.request(
        2,
        "tools/call",
        json!({"name": "list_files", "arguments": {"path": "."}, "_meta": {"traceparent": parent}}),
    );
    assert_eq!(reply["result"]["isError"], false, "{reply}");
    // A malformed, huge traceparent is ignored: the call runs.
    let huge = format!("{parent}{}", "0".repeat(100_000));
    let reply = server.request(
        3,
        "tools/call",
        json!({"name": "list_files", "arguments": {"path": "."}, "_meta": {"traceparent": huge}}),
    );
    assert_eq!(reply["result"]["isError"], false, "{reply}");
    // The end of input flushes what is queued.
    let (code, stderr, _) = server.finish();
    assert_eq!(code, Some(0), "{stderr}");
    let mut all = Vec::new();
    while let Ok(body) = bodies.recv_timeout(Duration::from_secs(5)) {
        all.extend(body);
        let name = b"tools/call list_files";
        if all.windows(name.len()).filter(|w| *w == name).count() >= 2 {
            break;
        }
    }
    let trace_id = [
        0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47,
        0x36,
    ];
    let span_id = [0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7];
    let name = b"tools/call list_files";
    assert_eq!(
        all.windows(name.len()).filter(|w| *w == name).count(),
        2,
        "one span per call"
    );
    let child = b"execute_tool list_files";
    assert_eq!(
        all.windows(child.len()).filter(|w| *w == child).count(),
        2,
        "a child span per handler run"
    );
    assert!(
        contains(&all, &trace_id),
        "the span carries the client's trace id"
    );
    // parent_span_id is field 4, 8 bytes long: 0x22 0x08.
    assert!(contains(&all, &[&[0x22, 0x08][..], &span_id].concat()));
    assert!(contains(&all, b"network.transport"));
    assert!(contains(&all, b"pipe"));
    assert!(
        !contains(&all, b"a.txt"),
        "no arguments or results in spans"
    );
}

/// `host run` with webfetch and a collector; one fetch with the client's `traceparent`:
/// (what the server behind the plugin saw as `traceparent`, the collector's bytes).
fn fetch_with_traceparent(extra: &[&str], parent: &str) -> (String, Vec<u8>) {
    let (origin, seen) = traceparent_server();
    let (collector, bodies) = otlp_receiver();
    let root = tempfile::tempdir().unwrap();
    let plugins = webfetch_granted(&origin);
    let cache = tempfile::tempdir().unwrap();
    let mut args = vec![
        "--no-builtins",
        "--plugins",
        plugins.path().to_str().unwrap(),
        "--cache-dir",
        cache.path().to_str().unwrap(),
        "--plugin-http",
        &origin,
        "--plugin-http-allow-net",
        "127.0.0.1",
        "--otlp-endpoint",
        &collector,
    ];
    args.extend(extra);
    let mut server = Server::start(root.path(), &args);
    server.drain_stderr();
    let init = server.request(
        1,
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}),
    );
    assert!(init["result"].is_object(), "{init}");
    let reply = server.request(
        2,
        "tools/call",
        json!({"name": "fetch", "arguments": {"url": format!("{origin}/x")}, "_meta": {"traceparent": parent}}),
    );
    assert_eq!(reply["result"]["isError"], false, "{reply}");
    let header = seen.recv_timeout(Duration::from_secs(10)).unwrap();
    let (code, stderr, _) = server.finish();
    assert_eq!(code, Some(0), "{stderr}");
    let mut all = Vec::new();
    while let Ok(body) = bodies.recv_timeout(Duration::from_secs(2)) {
        all.extend(body);
    }
    (header, all)
}

#[test]
fn a_plugins_request_carries_the_calls_traceparent_unless_turned_off() {
    let parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let (header, spans) = fetch_with_traceparent(&[], parent);
    // The client's trace, with the request's own CLIENT span as parent (W3C: the
    // downstream server's parent is the span of the request that reached it).
    assert_eq!(header.len(), 55, "{header:?}");
    assert_eq!(&header[..36], &parent[..36], "{header}");
    assert_eq!(&header[52..], "-01");
    assert_ne!(
        &header[36..52],
        &parent[36..52],
        "a span of the host's, not the client's"
    );
    let own: Vec<u8> = (0..8)
        .map(|i| u8::from_str_radix(&header[36 + 2 * i..38 + 2 * i], 16).unwrap())
        .collect();
    // The exported span whose span_id (field 2, 8 bytes) the header named is the
    // request's: its parent_span_id (field 4, 8 bytes), then its name (field 5) `GET`
    // and its kind (field 6) CLIENT (3).
    let named = [&[0x12, 0x08][..], &own].concat();
    let at = spans
        .windows(named.len())
        .position(|w| w == named)
        .expect("the exported spans have the id the request named");
    let after = &spans[at + named.len()..];
    assert_eq!(&after[..2], &[0x22, 0x08], "a parent follows the span id");
    assert_eq!(
        &after[10..17],
        &[0x2a, 0x03, b'G', b'E', b'T', 0x30, 0x03],
        "the span the request named is its CLIENT span GET, not the call's"
    );
    let (header, _) = fetch_with_traceparent(&["--no-trace-propagation"], parent);
    assert_eq!(header, "", "no traceparent with --no-trace-propagation");
}
