//! `jsonrpc_line`: arbitrary bytes as stdio lines into the MCP server, in process, with
//! the file tools over the memory store and no plugins.
//!
//! Invariants: no panic; every answer is one line holding one JSON-RPC 2.0 response
//! (`jsonrpc: "2.0"`, exactly one of `result` and `error`, an integer error code and a
//! message) whose id is one the input sent, byte for byte, or `null` for an error; no
//! more answers than requests; every line under the size caps; and the server still
//! answers a `ping` sent after the fuzzer's lines.
#![no_main]

use std::collections::HashSet;
use std::sync::{Arc, OnceLock};

use libfuzzer_sys::fuzz_target;
use serde::Deserialize;
use serde_json::value::RawValue;
use toolhost::registry::{Environment, Registry, DEFAULT_RESULT_CAP};
use toolhost::tools::VfsToolOptions;
use toolhost::vfs::{MemoryStorage, Storage};
use toolhost_fuzz::{file_registry, runtime};
use toolhost_mcp::McpServer;

const PING_ID: &str = r#""toolhost-fuzz-final-ping-7f3a""#;

fn registry() -> Arc<Registry> {
    static REGISTRY: OnceLock<Arc<Registry>> = OnceLock::new();
    Arc::clone(REGISTRY.get_or_init(|| {
        let storage = Arc::new(MemoryStorage::new());
        storage.write("a.md", b"alpha\nbeta\n", "").expect("seed");
        file_registry(VfsToolOptions::new(storage as Arc<dyn Storage>))
    }))
}

#[derive(Deserialize)]
struct Response<'a> {
    jsonrpc: &'a str,
    /// Absent only in an error answering a message without a usable id, where the
    /// negotiated revision forbids `"id": null`.
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    result: Option<&'a RawValue>,
    #[serde(default)]
    error: Option<ErrorObject>,
}

#[derive(Deserialize)]
struct ErrorObject {
    code: i64,
    message: String,
}

/// The raw id text of every request-like object in the input (top level or in an array).
fn sent_ids(input: &[u8]) -> HashSet<String> {
    let mut ids = HashSet::new();
    for line in input.split(|&b| b == b'\n') {
        let Ok(value) = serde_json::from_slice::<&RawValue>(line.trim_ascii()) else {
            continue;
        };
        let mut objects = vec![value];
        if let Ok(items) = serde_json::from_str::<Vec<&RawValue>>(value.get()) {
            objects.extend(items);
        }
        for object in objects {
            #[derive(Deserialize)]
            struct WithId<'a> {
                #[serde(borrow)]
                id: Option<&'a RawValue>,
            }
            if let Ok(WithId { id: Some(id) }) = serde_json::from_str::<WithId>(object.get()) {
                ids.insert(id.get().to_owned());
            }
        }
    }
    ids
}

fn check(response: &Response, ids: &HashSet<String>, line: &str) {
    assert_eq!(response.jsonrpc, "2.0", "{line}");
    match (&response.result, &response.error) {
        (Some(_), None) => {
            let id = response.id.map(RawValue::get).unwrap_or_default();
            assert!(ids.contains(id), "unknown id in {line}");
        }
        (None, Some(error)) => {
            assert!((-32768..=-32000).contains(&error.code), "{line}");
            assert!(!error.message.is_empty(), "{line}");
            let id = response.id.map_or("null", RawValue::get);
            assert!(id == "null" || ids.contains(id), "unknown id in {line}");
        }
        _ => panic!("a response has exactly one of result and error: {line}"),
    }
}

fuzz_target!(|data: &[u8]| {
    let mut input = data.to_vec();
    input.extend_from_slice(b"\n{\"jsonrpc\":\"2.0\",\"id\":");
    input.extend_from_slice(PING_ID.as_bytes());
    input.extend_from_slice(b",\"method\":\"ping\"}\n");
    let requests = input
        .split(|&b| b == b'\n')
        .filter(|l| !l.trim_ascii().is_empty())
        .count();
    let ids = sent_ids(&input);

    let server = McpServer::new(registry()).with_session(Environment::default());
    let mut output = Vec::new();
    runtime()
        .block_on(server.serve(input.as_slice(), &mut output))
        .expect("serving from memory into memory does not fail");

    let text = std::str::from_utf8(&output).expect("answers are UTF-8");
    assert!(
        text.is_empty() || text.ends_with('\n'),
        "the last answer ends its line"
    );
    let mut answers = 0;
    let mut pinged = false;
    for line in text.lines() {
        answers += 1;
        // tools/list of the eleven built-in tools is the longest non-call answer.
        assert!(
            line.len() <= DEFAULT_RESULT_CAP + 16 * 1024,
            "answer of {} bytes",
            line.len()
        );
        // A batch (where the negotiated revision allows one) is answered with an array.
        let responses: Vec<Response> = if line.starts_with('[') {
            serde_json::from_str(line)
        } else {
            serde_json::from_str(line).map(|one| vec![one])
        }
        .unwrap_or_else(|err| panic!("answer is not a JSON-RPC response ({err}): {line}"));
        for response in responses {
            check(&response, &ids, line);
            if response.id.map(RawValue::get) == Some(PING_ID)
                && response.result.map(RawValue::get) == Some("{}")
            {
                pinged = true;
            }
        }
    }
    assert!(answers <= requests, "{answers} answers to {requests} lines");
    assert!(pinged, "the server did not answer the final ping: {text}");
});
