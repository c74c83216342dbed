//! The harness of the `serve --http` tests: a `host` child serving HTTP on loopback
//! (its log lines as they come, SIGTERM and wait), and one-request HTTP/1.1 helpers.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use crate::host;
use serde_json::{json, Value};

pub(super) const EXIT_USAGE: i32 = 2;
pub(super) const EXIT_SETUP: i32 = 3;
pub(super) const TOKEN: &str = "cli-test-token-0123456789";

/// A `host` serving HTTP, and its log lines (stderr) as they come.
pub(super) struct Server {
    pub(super) child: Child,
    pub(super) addr: SocketAddr,
    pub(super) log: mpsc::Receiver<String>,
    pub(super) seen: Vec<String>,
}

impl Server {
    pub(super) fn start(args: &[&str]) -> Server {
        let mut command = host();
        command.args(args);
        Self::start_command(&mut command)
    }

    /// Starts `command` (a `host serve --http`, or a shell that runs one).
    pub(super) fn start_command(command: &mut Command) -> Server {
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn host");
        let (sender, log) = mpsc::channel();
        let stderr = child.stderr.take().unwrap();
        thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        let mut server = Server {
            child,
            addr: "0.0.0.0:0".parse().unwrap(),
            log,
            seen: Vec::new(),
        };
        let line = server.wait_for("Streamable HTTP on http://");
        let url = line.split("Streamable HTTP on http://").nth(1).unwrap();
        server.addr = url.split('/').next().unwrap().parse().unwrap();
        server
    }

    /// Waits (at most 60 s) for a log line containing `text`.
    pub(super) fn wait_for(&mut self, text: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(60);
        if let Some(line) = self.seen.iter().find(|l| l.contains(text)) {
            return line.clone();
        }
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.log.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if line.contains(text) {
                        return line;
                    }
                }
                Err(_) => panic!(
                    "no log line with {text:?}; the log so far:\n{}",
                    self.seen.join("\n")
                ),
            }
        }
    }

    pub(super) fn terminate(&mut self) -> (i32, Duration) {
        let started = Instant::now();
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return (status.code().unwrap_or(-1), started.elapsed());
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "host did not stop"
            );
            thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(super) struct Reply {
    pub(super) status: u16,
    pub(super) headers: Vec<(String, String)>,
    pub(super) body: String,
}

impl Reply {
    pub(super) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
    pub(super) fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|_| panic!("not JSON: {}", self.body))
    }
}

/// One POST /mcp over a fresh connection (HTTP/1.1, `Connection: close`).
pub(super) fn post(addr: SocketAddr, headers: &[(&str, &str)], body: &str) -> Reply {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let mut request = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n",
        addr.port(),
        body.len()
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(body);
    stream.write_all(request.as_bytes()).unwrap();
    let mut raw = String::new();
    stream.read_to_string(&mut raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").expect("a whole response");
    let mut lines = head.lines();
    let status = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers = lines
        .filter_map(|line| line.split_once(": "))
        .map(|(n, v)| (n.to_owned(), v.to_owned()))
        .collect();
    Reply {
        status,
        headers,
        body: body.to_owned(),
    }
}

pub(super) fn initialize(addr: SocketAddr, auth: &[(&str, &str)]) -> String {
    let reply = post(
        addr,
        auth,
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"cli-test","version":"1"}}}"#,
    );
    assert_eq!(reply.status, 200, "{}", reply.body);
    reply
        .header("mcp-session-id")
        .expect("a session id")
        .to_owned()
}

pub(super) fn call(
    addr: SocketAddr,
    headers: &[(&str, &str)],
    tool: &str,
    arguments: Value,
) -> Value {
    let body = json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":tool,"arguments":arguments}});
    let reply = post(addr, headers, &body.to_string());
    assert_eq!(reply.status, 200, "{}", reply.body);
    reply.json()["result"].clone()
}

pub(super) fn text(result: &Value) -> &str {
    result["content"][0]["text"].as_str().unwrap()
}

pub(super) fn dir_str(path: &Path) -> &str {
    path.to_str().unwrap()
}

pub(super) fn plugins_with(names: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    toolhost_tests::install(dir.path(), names).unwrap();
    dir
}
