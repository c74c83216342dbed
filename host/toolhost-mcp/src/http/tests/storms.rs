//! Connection floods (slowloris): half-open connections from many addresses and from
//! one, headers and bodies that stall or trickle, and the clients that must still be
//! served meanwhile. Source addresses are 127.0.0.2 and up, each playing one peer; the
//! fresh clients of the helpers in `mod.rs` come from 127.0.0.1.

use std::net::{IpAddr, Ipv4Addr};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpSocket;

use super::*;

/// The start of a request that never ends: what a slowloris client sends and then holds.
const HALF: &[u8] = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n";

/// 127.0.0.`n`.
fn loopback(n: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 0, n))
}

/// A connection to `addr` from `from`.
async fn connect_from(from: IpAddr, addr: SocketAddr) -> std::io::Result<TcpStream> {
    let socket = TcpSocket::new_v4()?;
    socket.bind(SocketAddr::new(from, 0))?;
    socket.connect(addr).await
}

/// `count` connections from each of 127.0.0.`first`.. `first + peers - 1`, each having
/// sent [`HALF`].
async fn half_open(addr: SocketAddr, first: u8, peers: u8, count: usize) -> Vec<TcpStream> {
    let mut held = Vec::new();
    for peer in first..first + peers {
        for _ in 0..count {
            let mut stream = connect_from(loopback(peer), addr).await.unwrap();
            // A write may meet a connection the server already pushed out.
            let _ = stream.write_all(HALF).await;
            held.push(stream);
        }
    }
    held
}

/// Raises this process's open-file limit to its hard limit: a flood holds a descriptor
/// at each end.
fn raise_fd_limit() {
    #[cfg(unix)]
    {
        use rustix::process::{getrlimit, setrlimit, Resource};
        let mut limit = getrlimit(Resource::Nofile);
        if limit.maximum.is_some() && limit.current != limit.maximum {
            limit.current = limit.maximum;
            let _ = setrlimit(Resource::Nofile, limit);
        }
    }
}

/// A whole HTTP/1.1 request, `Connection: close`.
fn request(headers: &str, body: &str) -> Vec<u8> {
    format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: application/json\r\nConnection: close\r\n{headers}Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Everything the server sends until it closes (or 20 s), and how long that took.
async fn read_to_close(stream: &mut TcpStream) -> (String, Duration) {
    let started = Instant::now();
    let mut got = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(20), stream.read_to_end(&mut got)).await;
    (
        String::from_utf8_lossy(&got).into_owned(),
        started.elapsed(),
    )
}

/// The JSON body of a raw HTTP/1.1 answer, after checking its status line.
fn answer_json(raw: &str, status: &str) -> Value {
    assert!(raw.starts_with(&format!("HTTP/1.1 {status}")), "{raw}");
    let body = raw
        .split_once("\r\n\r\n")
        .map(|(_, body)| body)
        .unwrap_or("");
    serde_json::from_str(body).unwrap_or_else(|_| panic!("not JSON: {raw}"))
}

fn assert_initialized(value: &Value) {
    assert_eq!(value["id"], 1, "{value}");
    assert_eq!(value["result"]["protocolVersion"], "2025-06-18", "{value}");
}

/// The fresh client's bound: the figure is 1 s (before: 10 s, the old fixed
/// header timeout, or never for connections that sent nothing).
const FRESH: Duration = Duration::from_secs(1);

#[tokio::test]
async fn half_open_floods_do_not_lock_out_fresh_or_authenticated_clients() {
    raise_fd_limit();
    let probe = Arc::default();
    let mut config = stateful();
    config.tokens = Some(tokens());
    let server = start(config, &probe).await;
    let addr = server.addr;
    let bearer = format!("Bearer {TOKEN_A}");

    // A client with a token, on a kept-alive connection opened before the flood.
    let stream = TcpStream::connect(addr).await.unwrap();
    let (mut kept, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(connection);
    let kept_request = |body: &str| {
        hyper::Request::post(MCP_PATH)
            .header("host", "127.0.0.1")
            .header("content-type", "application/json")
            .header("accept", "application/json")
            .header("authorization", &bearer)
            .body(Full::new(Bytes::from(body.to_owned())))
            .unwrap()
    };
    let answer = kept.send_request(kept_request(INIT)).await.unwrap();
    assert_eq!(answer.status(), StatusCode::OK);
    let session = answer.headers()[SESSION_HEADER]
        .to_str()
        .unwrap()
        .to_owned();
    drop(answer);

    // 600 half-open connections from 30 addresses (20 each, under the per-peer cap):
    // more than the 256 slots.
    let held = half_open(addr, 2, 30, 20).await;
    assert_eq!(held.len(), 600);
    until("the server holds every slot", || {
        server.connections.len() == DEFAULT_MAX_CONNECTIONS
    })
    .await;

    // A fresh client with a token is answered at once.
    let started = Instant::now();
    let reply = post(addr, &[("authorization", &bearer)], INIT).await;
    let took = started.elapsed();
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    assert_initialized(&reply.json());
    assert!(took < FRESH, "the fresh client waited {took:?}");
    // So is one without: with its exact refusal.
    let started = Instant::now();
    let reply = post(addr, &[], INIT).await;
    assert!(started.elapsed() < FRESH, "{:?}", started.elapsed());
    assert_eq!(reply.status, StatusCode::UNAUTHORIZED);
    assert_eq!(
        reply.json()["error"]["message"],
        "Unauthorized: send the token as `Authorization: Bearer TOKEN`"
    );

    // More of the flood (another 300) does not push out the authenticated connection.
    let more = half_open(addr, 40, 15, 20).await;
    let request = kept_request(LIST);
    let mut request = request;
    request
        .headers_mut()
        .insert(SESSION_HEADER, session.parse().unwrap());
    let answer = tokio::time::timeout(FRESH, kept.send_request(request))
        .await
        .expect("the kept connection answers in time")
        .unwrap();
    assert_eq!(answer.status(), StatusCode::OK);
    let body = answer.into_body().collect().await.unwrap().to_bytes();
    let list: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(list["id"], 2);
    assert!(list["result"]["tools"].as_array().unwrap().len() >= 4);
    drop((held, more));
    server.stop().await;
}

#[tokio::test]
async fn one_address_holds_at_most_its_share_of_pending_connections() {
    raise_fd_limit();
    let probe = Arc::default();
    let server = start(HttpConfig::new(None), &probe).await;
    let addr = server.addr;
    let flood = loopback(5);
    let mut held = half_open(addr, 5, 1, DEFAULT_MAX_PENDING_PER_PEER).await;
    // The next one from that address is refused at once, saying why.
    let mut extra = connect_from(flood, addr).await.unwrap();
    let (raw, took) = read_to_close(&mut extra).await;
    assert!(took < FRESH, "{took:?}");
    assert!(
        raw.starts_with("HTTP/1.1 503 Service Unavailable\r\n"),
        "{raw:?}"
    );
    assert!(raw.contains("\r\nretry-after: 1\r\n"), "{raw}");
    assert!(
        raw.ends_with("\r\n\r\nService Unavailable: too many connections from your address have not sent a request yet; use the ones you have\n"),
        "{raw:?}"
    );
    // Another address is not affected.
    let reply = post(addr, &[], INIT).await;
    assert_initialized(&reply.json());
    // Finishing a request on one of them frees its place for a new connection.
    let mut first = held.remove(0);
    let rest = b"Accept: application/json\r\nConnection: close\r\nContent-Length: 0\r\n\r\n";
    first.write_all(rest).await.unwrap();
    let (raw, _) = read_to_close(&mut first).await;
    // An empty body is not a message; the request passed the checks all the same.
    assert!(raw.starts_with("HTTP/1.1 400"), "{raw}");
    let mut again = connect_from(flood, addr).await.unwrap();
    again.write_all(&request("", LIST)).await.unwrap();
    let (raw, _) = read_to_close(&mut again).await;
    assert_eq!(answer_json(&raw, "200")["id"], 2);

    // Connections whose requests passed do not count: a proxy's 40 kept-alive
    // connections from one address, and a 41st.
    let proxy = loopback(6);
    let mut kept = Vec::new();
    for _ in 0..=DEFAULT_MAX_PENDING_PER_PEER + 8 {
        let stream = connect_from(proxy, addr).await.unwrap();
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .unwrap();
        tokio::spawn(connection);
        let request = hyper::Request::post(MCP_PATH)
            .header("host", "127.0.0.1")
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(LIST)))
            .unwrap();
        let answer = sender.send_request(request).await.unwrap();
        assert_eq!(answer.status(), StatusCode::OK);
        kept.push(sender);
    }
    assert_eq!(kept.len(), 41);
    drop(held);
    server.stop().await;
}

#[tokio::test]
async fn stalled_requests_are_closed_on_the_short_clock_and_trickling_ones_are_not() {
    let probe = Arc::default();
    let server = start(HttpConfig::new(None), &probe).await;
    let addr = server.addr;
    // Nothing sent, part of the headers, and headers with part of the body: each closed
    // after about 2 s (+ 1 s per 500 bytes received), without an answer.
    let opened = Instant::now();
    let mut silent = connect_from(loopback(7), addr).await.unwrap();
    let mut stalled = connect_from(loopback(8), addr).await.unwrap();
    stalled.write_all(HALF).await.unwrap();
    let mut stalled_body = connect_from(loopback(9), addr).await.unwrap();
    let whole = request("", INIT);
    stalled_body
        .write_all(&whole[..whole.len() - 20])
        .await
        .unwrap();
    for (what, stream) in [
        ("silent", &mut silent),
        ("stalled headers", &mut stalled),
        ("stalled body", &mut stalled_body),
    ] {
        let (raw, _) = read_to_close(stream).await;
        let took = opened.elapsed();
        assert_eq!(raw, "", "{what}");
        assert!(
            took > Duration::from_millis(1500) && took < Duration::from_secs(5),
            "{what}: closed after {took:?}, not about 2 s"
        );
    }

    // Headers (then a body) trickling in over about 3 s each, faster than 500 B/s: served.
    let trickle = |from: u8, headers: String, body: String| async move {
        let mut stream = connect_from(loopback(from), addr).await.unwrap();
        let bytes = request(&headers, &body);
        let started = Instant::now();
        for chunk in bytes.chunks(100) {
            stream.write_all(chunk).await.unwrap();
            tokio::time::sleep(Duration::from_millis(150)).await;
        }
        let sent = started.elapsed();
        let (raw, _) = read_to_close(&mut stream).await;
        (raw, sent)
    };
    let padding = format!("X-Padding: {}\r\n", "p".repeat(2000));
    let slow_headers = trickle(10, padding, INIT.to_owned());
    // JSON allows whitespace: a body of 2 kB.
    let slow_body = trickle(11, String::new(), format!("{INIT}{}", " ".repeat(2000)));
    let ((headers_raw, headers_sent), (body_raw, body_sent)) =
        tokio::join!(slow_headers, slow_body);
    for (raw, sent) in [(headers_raw, headers_sent), (body_raw, body_sent)] {
        assert!(sent > Duration::from_secs(3), "{sent:?}");
        assert_initialized(&answer_json(&raw, "200"));
    }
    server.stop().await;
}

/// A kept-alive connection is back on the short clock for its next request: its clock
/// sleeps towards the idle timeout (10 s) after an answer, and a next request whose body
/// stalls must wake it (the deadline came nearer), so the connection is closed about 2 s
/// after the stall, not when the idle timeout ends (7.5 s after).
#[tokio::test]
async fn a_kept_alive_connection_that_stalls_its_next_body_is_closed_on_the_short_clock() {
    let probe = Arc::default();
    let server = start(HttpConfig::new(None), &probe).await;
    let mut stream = connect_from(loopback(12), server.addr).await.unwrap();
    let keep_alive = |body: &str| {
        format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .into_bytes()
    };
    stream.write_all(&keep_alive(INIT)).await.unwrap();
    // The first answer, whole: its head and a JSON body that parses.
    let mut first = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let text = String::from_utf8_lossy(&first).into_owned();
        if let Some((_, body)) = text.split_once("\r\n\r\n") {
            if serde_json::from_str::<Value>(body).is_ok() {
                assert_initialized(&answer_json(&text, "200"));
                break;
            }
        }
        let read = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut chunk)).await;
        let n = read.unwrap().unwrap();
        assert!(n > 0, "closed before the first answer: {text}");
        first.extend_from_slice(&chunk[..n]);
    }
    // Idle past the header timeout, so the clock has looked again and sleeps towards
    // the idle timeout (10 s from the answer); then a request whose body stalls.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let second = keep_alive(INIT);
    stream
        .write_all(&second[..second.len() - 20])
        .await
        .unwrap();
    let (raw, took) = read_to_close(&mut stream).await;
    assert_eq!(raw, "");
    assert!(
        took > Duration::from_millis(1500) && took < Duration::from_secs(5),
        "closed after {took:?}, not about 2 s"
    );
    server.stop().await;
}

/// The figure: a fresh client's answer while 2,000 half-open connections (from
/// 100 addresses, 20 each) are held, with the default 256 slots and with 4,096 (all
/// held by the server). `cargo test -p toolhost-mcp --features http --lib --release
/// two_thousand -- --ignored --nocapture`
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: opens 2,000 connections; run by hand"]
#[allow(clippy::print_stderr, reason = "the measurement's report")]
async fn two_thousand_half_open_connections() {
    raise_fd_limit();
    for max_connections in [DEFAULT_MAX_CONNECTIONS, 4096] {
        let probe = Arc::default();
        let mut config = stateful();
        config.tokens = Some(tokens());
        config.max_connections = max_connections;
        let server = start(config, &probe).await;
        let opened = Instant::now();
        let held = half_open(server.addr, 2, 100, 20).await;
        let opening = opened.elapsed();
        let bearer = format!("Bearer {TOKEN_A}");
        let mut times = Vec::new();
        for _ in 0..5 {
            let started = Instant::now();
            let reply = post(server.addr, &[("authorization", &bearer)], INIT).await;
            times.push(started.elapsed());
            assert_initialized(&reply.json());
        }
        eprintln!(
            "max_connections {max_connections}: {} half-open held (opened in {opening:?}), server holds {}; fresh client answered in {times:?}",
            held.len(),
            server.connections.len(),
        );
        drop(held);
        server.stop().await;
    }
}
