//! What `host run` does with the stdin and stdout it is given: pipes and sockets (how MCP
//! clients start servers) are served non-blocking on the event loop and handed back
//! blocking; a file, or a stdout that is also stderr, is served through blocking stdio.
//! Each kind must answer every request exactly, and the open file description the host
//! shares with its parent must end as the host found it.

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::process::{Child, Stdio};

use rustix::fs::{fcntl_getfl, OFlags};
use serde_json::Value;

use crate::host;

const PINGS: &[u8] = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n\
{\"jsonrpc\":\"2.0\",\"id\":\"two\",\"method\":\"ping\"}\n";

fn non_blocking(fd: &impl AsFd) -> bool {
    fcntl_getfl(fd).unwrap().contains(OFlags::NONBLOCK)
}

fn spawn(root: &std::path::Path, stdin: Stdio, stdout: Stdio, stderr: Stdio) -> Child {
    host()
        .arg("run")
        .arg("--root")
        .arg(root)
        .stdin(stdin)
        .stdout(stdout)
        .stderr(stderr)
        .spawn()
        .expect("spawn host run")
}

/// Reads JSON-RPC answers (skipping any log line) until both pings are answered, and
/// checks them exactly.
fn expect_pongs(output: &mut impl BufRead) {
    let mut ids = Vec::new();
    let mut line = String::new();
    while ids.len() < 2 {
        line.clear();
        assert_ne!(
            output.read_line(&mut line).unwrap(),
            0,
            "output ended early"
        );
        let Ok(answer) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        assert_eq!(answer["result"], serde_json::json!({}), "{answer}");
        ids.push(answer["id"].clone());
    }
    assert_eq!(ids, [serde_json::json!(1), serde_json::json!("two")]);
}

fn exit_code(mut child: Child) -> Option<i32> {
    child.wait().unwrap().code()
}

#[test]
fn pipes_are_served_non_blocking_and_handed_back_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let (request_reader, mut requests) = std::io::pipe().unwrap();
    let (answers, answer_writer) = std::io::pipe().unwrap();
    // The test keeps a descriptor of each end the host gets: same open file description.
    let host_stdin = OwnedFd::from(request_reader.try_clone().unwrap());
    let host_stdout = OwnedFd::from(answer_writer.try_clone().unwrap());
    let child = spawn(
        dir.path(),
        Stdio::from(host_stdin),
        Stdio::from(host_stdout),
        Stdio::null(),
    );
    assert!(!non_blocking(&request_reader) && !non_blocking(&answer_writer));
    requests.write_all(PINGS).unwrap();
    expect_pongs(&mut BufReader::new(answers));
    assert!(non_blocking(&request_reader), "stdin is not event-driven");
    assert!(non_blocking(&answer_writer), "stdout is not event-driven");
    drop(requests);
    assert_eq!(exit_code(child), Some(0));
    assert!(
        !non_blocking(&request_reader),
        "stdin was left non-blocking"
    );
    assert!(
        !non_blocking(&answer_writer),
        "stdout was left non-blocking"
    );
}

#[test]
fn a_socket_as_stdin_and_stdout_is_served_like_a_pipe() {
    // Node's child_process (and so many MCP clients) gives its child socket pairs.
    let dir = tempfile::tempdir().unwrap();
    let (mut client, host_end) = UnixStream::pair().unwrap();
    let child = spawn(
        dir.path(),
        Stdio::from(OwnedFd::from(host_end.try_clone().unwrap())),
        Stdio::from(OwnedFd::from(host_end.try_clone().unwrap())),
        Stdio::null(),
    );
    client.write_all(PINGS).unwrap();
    expect_pongs(&mut BufReader::new(client.try_clone().unwrap()));
    assert!(non_blocking(&host_end), "the socket is not event-driven");
    client.shutdown(std::net::Shutdown::Write).unwrap();
    assert_eq!(exit_code(child), Some(0));
    assert!(!non_blocking(&host_end), "the socket was left non-blocking");
}

#[test]
fn stdout_shared_with_stderr_stays_blocking_and_answers() {
    // `host run 2>&1`: the log writes to the same description and must never see EAGAIN.
    let dir = tempfile::tempdir().unwrap();
    let (answers, answer_writer) = std::io::pipe().unwrap();
    let mut child = spawn(
        dir.path(),
        Stdio::piped(),
        Stdio::from(OwnedFd::from(answer_writer.try_clone().unwrap())),
        Stdio::from(OwnedFd::from(answer_writer.try_clone().unwrap())),
    );
    let mut requests = child.stdin.take().unwrap();
    requests.write_all(PINGS).unwrap();
    expect_pongs(&mut BufReader::new(answers));
    assert!(
        !non_blocking(&answer_writer),
        "stdout (also stderr) was made non-blocking"
    );
    drop(requests);
    assert_eq!(exit_code(child), Some(0));
}

#[test]
fn requests_from_a_file_are_answered_into_a_file() {
    // Files cannot be polled: blocking stdio serves them.
    let dir = tempfile::tempdir().unwrap();
    let requests = dir.path().join("requests.jsonl");
    let answers = dir.path().join("answers.jsonl");
    std::fs::write(&requests, PINGS).unwrap();
    let child = spawn(
        dir.path(),
        Stdio::from(File::open(&requests).unwrap()),
        Stdio::from(File::create(&answers).unwrap()),
        Stdio::null(),
    );
    assert_eq!(exit_code(child), Some(0));
    expect_pongs(&mut BufReader::new(File::open(&answers).unwrap()));
}

#[test]
fn answers_wait_in_full_while_the_client_does_not_read_a_non_blocking_pipe() {
    // 3000 answers are ~150 KB, more than a pipe holds (64 KiB): the host's writes hit
    // EAGAIN part-way through a line, and must resume exactly there once the client reads.
    let dir = tempfile::tempdir().unwrap();
    let mut child = spawn(dir.path(), Stdio::piped(), Stdio::piped(), Stdio::null());
    let mut requests = child.stdin.take().unwrap();
    let calls = 3000;
    let mut batch = String::new();
    for id in 0..calls {
        batch.push_str(&format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":\"ping-{id:05}\",\"method\":\"ping\"}}\n"
        ));
    }
    requests.write_all(batch.as_bytes()).unwrap();
    // Give the host time to fill the pipe and stall on it before anything is read.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let mut answers = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    for id in 0..calls {
        line.clear();
        assert_ne!(
            answers.read_line(&mut line).unwrap(),
            0,
            "answer {id} missing"
        );
        let answer: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(answer["id"], format!("ping-{id:05}"), "{line}");
        assert_eq!(answer["result"], serde_json::json!({}), "{line}");
    }
    drop(requests);
    line.clear();
    assert_eq!(
        answers.read_line(&mut line).unwrap(),
        0,
        "extra output: {line}"
    );
    assert_eq!(exit_code(child), Some(0));
}
