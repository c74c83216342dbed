//! The files under the root as resources, against a malicious client first: every
//! refusal with its exact code and the message's key words, and the server answering the
//! next request after it.

use std::sync::Arc;

use serde_json::{json, Value};

use toolhost::registry::Registry;
use toolhost::tools::VfsToolOptions;
use toolhost::vfs::{MemoryStorage, OsStorage, Storage};

use super::{FileResources, MAX_URI_BYTES, RESOURCE_NOT_FOUND};
use crate::jsonrpc::{INVALID_PARAMS, METHOD_NOT_FOUND};
use crate::McpServer;

/// Serves `requests` (each given an id from 1 on) followed by a ping, and gives the
/// answers by id; asserts the ping was answered (the server kept serving). The catalog
/// tests serve through it too.
pub(crate) async fn serve(server: McpServer, requests: &[Value]) -> Vec<Value> {
    let mut input = String::new();
    for (at, request) in requests.iter().enumerate() {
        let mut message = json!({"jsonrpc": "2.0", "id": at + 1});
        for (key, value) in request.as_object().unwrap() {
            message[key] = value.clone();
        }
        input.push_str(&message.to_string());
        input.push('\n');
    }
    input.push_str(r#"{"jsonrpc":"2.0","id":"alive","method":"ping"}"#);
    input.push('\n');
    let mut output = Vec::new();
    server.serve(input.as_bytes(), &mut output).await.unwrap();
    let mut answers: Vec<Value> = std::str::from_utf8(&output)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let alive = answers
        .iter()
        .position(|answer| answer["id"] == "alive")
        .expect("the ping after the requests is answered");
    assert_eq!(answers.remove(alive)["result"], json!({}));
    answers.sort_by_key(|answer| answer["id"].as_u64());
    assert_eq!(answers.len(), requests.len(), "{answers:?}");
    answers
}

fn server_over(options: VfsToolOptions) -> McpServer {
    McpServer::new(Arc::new(Registry::new())).with_resources(FileResources::new(options))
}

fn read(uri: &str) -> Value {
    json!({"method": "resources/read", "params": {"uri": uri}})
}

/// The code and message of an error answer.
fn error(answer: &Value) -> (i64, &str) {
    (
        answer["error"]["code"].as_i64().expect("an error"),
        answer["error"]["message"].as_str().unwrap(),
    )
}

fn assert_refused(answer: &Value, code: i64, words: &[&str]) {
    let (got, message) = error(answer);
    assert_eq!(got, code, "{message}");
    for word in words {
        assert!(message.contains(word), "{word:?} not in {message:?}");
    }
}

/// A root on disk with files of every kind, and a secret beside it.
struct Disk {
    _dir: tempfile::TempDir,
    root: std::path::PathBuf,
    outside: std::path::PathBuf,
}

fn disk() -> Disk {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let outside = dir.path().join("secret.txt");
    std::fs::create_dir_all(root.join("notes")).unwrap();
    std::fs::write(&outside, "TOP SECRET").unwrap();
    std::fs::write(root.join("notes/todo.md"), "- ship it\n").unwrap();
    std::fs::write(root.join(".env"), "API_KEY=hunter2\n").unwrap();
    std::fs::write(root.join("nul.txt"), "a\0b").unwrap();
    std::fs::write(root.join("image.png"), [0x89, b'P', b'N', b'G', 0, 0xff]).unwrap();
    #[cfg(unix)]
    std::os::unix::fs::symlink(&outside, root.join("escape.txt")).unwrap();
    Disk {
        _dir: dir,
        root,
        outside,
    }
}

fn disk_options(disk: &Disk) -> VfsToolOptions {
    VfsToolOptions::builder(Arc::new(OsStorage::open(&disk.root).unwrap()))
        .hide_hidden_paths(true)
        .build()
}

#[tokio::test]
async fn uris_that_leave_the_root_are_refused() {
    let disk = disk();
    let cases: Vec<(String, &[&str])> = vec![
        (
            "file:///../etc/passwd".into(),
            &["\"..\" segment", "file:///../etc/passwd"],
        ),
        (
            "file:///%2e%2e/secret".into(),
            &["\"..\" segment", "%2e%2e"],
        ),
        (
            "file:///notes/%2E%2E/%2E%2E/secret.txt".into(),
            &["\"..\" segment"],
        ),
        (
            "file:////etc/passwd".into(),
            &["must be relative to the store root"],
        ),
        (
            format!("file:///{}", disk.outside.display()),
            &["must be relative"],
        ),
        ("file:///notes/%2Fetc".into(), &["notes//etc"]),
        ("file:///.env".into(), &["hidden path"]),
        ("file:///%2Eenv".into(), &["hidden path"]),
        ("file:///a%00b.md".into(), &["NUL byte"]),
        ("file:///%ff%fe.md".into(), &["not UTF-8"]),
        (
            "file:///%zz".into(),
            &["% not followed by two hex digits", "%25"],
        ),
        ("file:///a%2".into(), &["% not followed by two hex digits"]),
        (
            "http://example.com/notes/todo.md".into(),
            &["not a file:/// URI", "file:///notes/todo.md"],
        ),
        ("FILE:///notes/todo.md".into(), &["not a file:/// URI"]),
        (
            "file://localhost/notes/todo.md".into(),
            &["not a file:/// URI"],
        ),
        ("notes/todo.md".into(), &["not a file:/// URI"]),
        ("file:///notes/todo.md?raw=1".into(), &["query or fragment"]),
        ("file:///notes/todo.md#top".into(), &["query or fragment"]),
        ("file:///notes".into(), &["is a directory"]),
    ];
    let mut requests: Vec<Value> = cases.iter().map(|(uri, _)| read(uri)).collect();
    #[cfg(unix)]
    requests.push(read("file:///escape.txt"));
    let answers = serve(server_over(disk_options(&disk)), &requests).await;
    for ((uri, words), answer) in cases.iter().zip(&answers) {
        assert_eq!(answer["error"]["code"], INVALID_PARAMS, "{uri}: {answer}");
        assert_refused(answer, INVALID_PARAMS, words);
        assert!(
            !answer.to_string().contains("TOP SECRET") && !answer.to_string().contains("hunter2"),
            "{uri}"
        );
    }
    #[cfg(unix)]
    {
        let symlink = answers.last().unwrap();
        assert_refused(
            symlink,
            INVALID_PARAMS,
            &["access to \"escape.txt\" is denied", "file:///escape.txt"],
        );
        assert!(!symlink.to_string().contains("TOP SECRET"));
    }
}

#[tokio::test]
async fn missing_files_are_resource_not_found_with_the_uri() {
    let disk = disk();
    let answers = serve(
        server_over(disk_options(&disk)),
        &[read("file:///notes/gone.md"), read("file:///no%20such.md")],
    )
    .await;
    assert_refused(
        &answers[0],
        RESOURCE_NOT_FOUND,
        &[
            "Resource not found",
            "file:///notes/gone.md",
            "resources/list",
        ],
    );
    assert_eq!(
        answers[0]["error"]["data"],
        json!({"uri": "file:///notes/gone.md"})
    );
    assert_eq!(
        answers[1]["error"]["data"],
        json!({"uri": "file:///no%20such.md"})
    );
}

#[tokio::test]
async fn a_huge_uri_is_refused_before_it_is_decoded() {
    let disk = disk();
    let huge = format!("file:///{}", "%2e".repeat((1 << 20) / 3));
    let just_over = format!("file:///{}", "a".repeat(MAX_URI_BYTES - 7));
    let answers = serve(
        server_over(disk_options(&disk)),
        &[read(&huge), read(&just_over)],
    )
    .await;
    let limit = format!("over the {MAX_URI_BYTES}-byte limit");
    assert_refused(
        &answers[0],
        INVALID_PARAMS,
        &[&format!("is {} bytes", huge.len()), &limit],
    );
    assert_refused(&answers[1], INVALID_PARAMS, &[&limit]);
    // The message does not echo the URI.
    assert!(error(&answers[0]).1.len() < 300, "{}", error(&answers[0]).1);
}

#[cfg(unix)]
#[tokio::test]
async fn a_sparse_file_over_the_read_cap_is_refused_unread() {
    let disk = disk();
    let file = std::fs::File::create(disk.root.join("huge.log")).unwrap();
    file.set_len(2 << 30).unwrap();
    let options = VfsToolOptions::builder(Arc::new(OsStorage::open(&disk.root).unwrap()))
        .max_read_bytes(1 << 20)
        .build();
    let started = std::time::Instant::now();
    let answers = serve(server_over(options), &[read("file:///huge.log")]).await;
    assert_refused(
        &answers[0],
        INVALID_PARAMS,
        &[
            "file:///huge.log",
            "is 2147483648 bytes",
            "over the 1048576-byte read cap",
            "--max-read-bytes",
        ],
    );
    // Reading 2 GiB of zeroes takes seconds; refusing at the size takes none.
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    // At the default cap (64 MiB) too.
    let answers = serve(
        server_over(disk_options(&disk)),
        &[read("file:///huge.log")],
    )
    .await;
    assert_refused(
        &answers[0],
        INVALID_PARAMS,
        &["over the 67108864-byte read cap"],
    );
}

#[tokio::test]
async fn text_and_binary_files_are_read_with_their_type() {
    let disk = disk();
    let answers = serve(
        server_over(disk_options(&disk)),
        &[
            read("file:///notes/todo.md"),
            read("file:///image.png"),
            read("file:///nul.txt"),
        ],
    )
    .await;
    // UTF-8 with a NUL byte is not text either.
    assert_eq!(
        answers[2]["result"]["contents"][0],
        json!({"uri": "file:///nul.txt", "mimeType": "text/plain", "blob": "YQBi"})
    );
    assert_eq!(
        answers[0]["result"],
        json!({"contents": [{"uri": "file:///notes/todo.md", "mimeType": "text/markdown", "text": "- ship it\n"}]})
    );
    assert_eq!(
        answers[1]["result"],
        json!({"contents": [{"uri": "file:///image.png", "mimeType": "image/png", "blob": "iVBORwD/"}]})
    );
}

#[tokio::test]
async fn the_list_is_what_list_files_shows() {
    let disk = disk();
    std::fs::write(disk.root.join("a b%é.md"), "x").unwrap();
    std::fs::create_dir(disk.root.join("_drafts")).unwrap();
    std::fs::write(disk.root.join("_drafts/plan.md"), "x").unwrap();
    let answers = serve(
        server_over(disk_options(&disk)),
        &[
            json!({"method": "resources/list"}),
            read("file:///a%20b%25%C3%A9.md"),
        ],
    )
    .await;
    let resources = answers[0]["result"]["resources"].as_array().unwrap();
    let uris: Vec<&str> = resources
        .iter()
        .map(|r| r["uri"].as_str().unwrap())
        .collect();
    // No .env, no _drafts, no symlink (OsStorage lists none): what list_files shows.
    assert_eq!(
        uris,
        [
            "file:///a%20b%25%C3%A9.md",
            "file:///image.png",
            "file:///notes/todo.md",
            "file:///nul.txt"
        ]
    );
    assert_eq!(
        resources[2],
        json!({"uri": "file:///notes/todo.md", "name": "notes/todo.md", "mimeType": "text/markdown", "size": 10})
    );
    assert_eq!(answers[0]["result"].get("nextCursor"), None);
    // Each URI reads back.
    assert_eq!(answers[1]["result"]["contents"][0]["text"], "x");
}

#[tokio::test]
async fn extension_filters_apply_to_the_list_and_reads() {
    let disk = disk();
    let options = VfsToolOptions::builder(Arc::new(OsStorage::open(&disk.root).unwrap()))
        .allowed_extensions(Some(vec![".md".into()]))
        .build();
    let answers = serve(
        server_over(options),
        &[
            json!({"method": "resources/list"}),
            read("file:///image.png"),
        ],
    )
    .await;
    let names: Vec<&str> = answers[0]["result"]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["notes/todo.md"]);
    assert_refused(
        &answers[1],
        INVALID_PARAMS,
        &["extension is not allowed", ".md"],
    );
}

fn memory_with(count: usize) -> VfsToolOptions {
    let storage = MemoryStorage::new();
    for i in 0..count {
        storage
            .write(&format!("d{}/f{i:06}.txt", i % 10), b"x", "")
            .unwrap();
    }
    VfsToolOptions::new(Arc::new(storage))
}

#[tokio::test]
async fn pages_cover_every_file_once_in_order() {
    let options = memory_with(250);
    let server = server_over(options).with_page_size(100);
    let (mut seen, mut cursor, mut pages) = (Vec::new(), None::<String>, 0);
    loop {
        let params = cursor.as_ref().map_or(json!({}), |c| json!({"cursor": c}));
        let answers = serve(
            server.clone(),
            &[json!({"method": "resources/list", "params": params})],
        )
        .await;
        let result = &answers[0]["result"];
        let page = result["resources"].as_array().unwrap();
        assert!(page.len() <= 100);
        seen.extend(page.iter().map(|r| r["name"].as_str().unwrap().to_owned()));
        pages += 1;
        match result["nextCursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => break,
        }
    }
    assert_eq!(pages, 3);
    let mut expected: Vec<String> = (0..250)
        .map(|i| format!("d{}/f{i:06}.txt", i % 10))
        .collect();
    expected.sort();
    assert_eq!(seen, expected);
}

#[tokio::test]
async fn a_hundred_thousand_files_are_listed_and_completed_a_page_at_a_time() {
    let server = server_over(memory_with(100_000));
    let answers = serve(
        server.clone(),
        &[
            json!({"method": "resources/list"}),
            json!({"method": "completion/complete", "params": {
                "ref": {"type": "ref/resource", "uri": "file:///{path}"},
                "argument": {"name": "path", "value": ""}}}),
            json!({"method": "completion/complete", "params": {
                "ref": {"type": "ref/resource", "uri": "file:///{path}"},
                "argument": {"name": "path", "value": "d3/f0001"}}}),
        ],
    )
    .await;
    let first = &answers[0]["result"];
    assert_eq!(first["resources"].as_array().unwrap().len(), 100);
    assert_eq!(first["resources"][99]["name"], "d0/f000990.txt");
    let next = first["nextCursor"].as_str().unwrap();
    let completion = &answers[1]["result"]["completion"];
    assert_eq!(completion["values"].as_array().unwrap().len(), 100);
    assert_eq!(completion["hasMore"], true);
    assert_eq!(completion.get("total"), None);
    assert_eq!(
        answers[2]["result"]["completion"],
        json!({"values": ["d3/f000103.txt", "d3/f000113.txt", "d3/f000123.txt", "d3/f000133.txt", "d3/f000143.txt", "d3/f000153.txt", "d3/f000163.txt", "d3/f000173.txt", "d3/f000183.txt", "d3/f000193.txt"], "hasMore": false, "total": 10})
    );
    let answers = serve(
        server,
        &[json!({"method": "resources/list", "params": {"cursor": next}})],
    )
    .await;
    assert_eq!(
        answers[0]["result"]["resources"][0]["name"],
        "d0/f001000.txt"
    );
}

#[tokio::test]
async fn forged_and_foreign_cursors_are_refused() {
    let registry = Registry::new();
    for i in 0..3 {
        registry
            .register(
                toolhost::registry::ToolDefinition::new(
                    format!("t{i}"),
                    "x",
                    json!({"type": "object"}),
                ),
                |_ctx: toolhost::registry::CallContext,
                 _args: toolhost::registry::Arguments,
                 _env: toolhost::registry::Environment| async {
                    Ok(toolhost::registry::ToolResult::new("x"))
                },
            )
            .unwrap();
    }
    let server = McpServer::new(Arc::new(registry))
        .with_page_size(1)
        .with_resources(FileResources::new(memory_with(3)));
    let answers = serve(server.clone(), &[json!({"method": "tools/list"})]).await;
    let tools_cursor = answers[0]["result"]["nextCursor"]
        .as_str()
        .unwrap()
        .to_owned();
    let answers = serve(
        server,
        &[
            json!({"method": "resources/list", "params": {"cursor": tools_cursor}}),
            json!({"method": "resources/list", "params": {"cursor": "r1.1.zz"}}),
            json!({"method": "resources/list", "params": {"cursor": "r1.1."}}),
            json!({"method": "resources/list", "params": {"cursor": format!("r1.1.{}", "61".repeat(1025))}}),
            json!({"method": "resources/list", "params": {"cursor": 7}}),
            // A well-formed cursor naming any path is only a place in path order.
            json!({"method": "resources/list", "params": {"cursor": "r1.0.2e2e2f6574632f706173737764"}}),
        ],
    )
    .await;
    for answer in &answers[..4] {
        assert_refused(
            answer,
            INVALID_PARAMS,
            &["\"cursor\" is not a cursor this server gave"],
        );
    }
    assert_refused(
        &answers[4],
        INVALID_PARAMS,
        &["\"cursor\" must be a string", "got number"],
    );
    assert_eq!(
        answers[5]["result"]["resources"][0]["name"],
        "d0/f000000.txt"
    );
}

#[tokio::test]
async fn templates_and_completion() {
    let disk = disk();
    let complete = |reference: Value, argument: Value| json!({"method": "completion/complete", "params": {"ref": reference, "argument": argument}});
    let template = json!({"type": "ref/resource", "uri": "file:///{path}"});
    let answers = serve(
        server_over(disk_options(&disk)),
        &[
            json!({"method": "resources/templates/list"}),
            complete(template.clone(), json!({"name": "path", "value": "no"})),
            complete(template.clone(), json!({"name": "path", "value": ".e"})),
            complete(
                json!({"type": "ref/prompt", "name": "x"}),
                json!({"name": "path", "value": ""}),
            ),
            complete(
                json!({"type": "ref/resource", "uri": "file:///notes/{x}"}),
                json!({"name": "path", "value": ""}),
            ),
            complete(template.clone(), json!({"name": "dir", "value": ""})),
            complete(
                template.clone(),
                json!({"name": "path", "value": "a".repeat(2000)}),
            ),
            complete(template, json!({"name": "path"})),
        ],
    )
    .await;
    assert_eq!(
        answers[0]["result"]["resourceTemplates"][0]["uriTemplate"],
        "file:///{path}"
    );
    assert_eq!(
        answers[0]["result"]["resourceTemplates"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        answers[1]["result"],
        json!({"completion": {"values": ["notes/todo.md"], "hasMore": false, "total": 1}})
    );
    // Hidden files are not completed either.
    assert_eq!(answers[2]["result"]["completion"]["values"], json!([]));
    assert_refused(&answers[3], INVALID_PARAMS, &["no prompts", "ref/resource"]);
    assert_refused(
        &answers[4],
        INVALID_PARAMS,
        &["ref.uri must be the template file:///{path}"],
    );
    assert_refused(
        &answers[5],
        INVALID_PARAMS,
        &["the template's one argument is path"],
    );
    assert_refused(
        &answers[6],
        INVALID_PARAMS,
        &["2000 bytes", "longer than any path"],
    );
    assert_refused(
        &answers[7],
        INVALID_PARAMS,
        &["argument.value must be a string"],
    );
}

#[tokio::test]
async fn capabilities_only_with_a_root() {
    let initialize = json!({"method": "initialize", "params": {"protocolVersion": "2025-06-18"}});
    let modern_meta = json!({"_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }});
    let discover = json!({"method": "server/discover", "params": modern_meta});
    let methods = [
        "resources/list",
        "resources/read",
        "resources/templates/list",
        "completion/complete",
    ];
    let mut requests = vec![initialize.clone(), discover.clone()];
    requests.extend(
        methods
            .iter()
            .map(|m| json!({"method": m, "params": {"uri": "file:///a.md"}})),
    );
    let plain = serve(McpServer::new(Arc::new(Registry::new())), &requests).await;
    assert_eq!(
        plain[0]["result"]["capabilities"],
        json!({"tools": {"listChanged": false}, "logging": {}})
    );
    assert_eq!(
        plain[1]["result"]["capabilities"],
        plain[0]["result"]["capabilities"]
    );
    for (method, answer) in methods.iter().zip(&plain[2..]) {
        assert_eq!(
            error(answer),
            (
                METHOD_NOT_FOUND,
                format!("Method not found: {method}; this server answers initialize, ping, tools/list, tools/call, logging/setLevel").as_str()
            )
        );
    }
    let disk = disk();
    let with = serve(
        server_over(disk_options(&disk)),
        &[initialize, discover, json!({"method": "nope"})],
    )
    .await;
    let capabilities =
        json!({"tools": {"listChanged": false}, "logging": {}, "resources": {}, "completions": {}});
    assert_eq!(with[0]["result"]["capabilities"], capabilities);
    assert_eq!(with[1]["result"]["capabilities"], capabilities);
    assert_eq!(
        error(&with[2]).1,
        "Method not found: nope; this server answers initialize, ping, tools/list, tools/call, logging/setLevel, resources/list, resources/read, resources/templates/list, completion/complete"
    );
}

#[tokio::test]
async fn the_modern_era_gets_its_result_fields() {
    let disk = disk();
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    let answers = serve(
        server_over(disk_options(&disk)),
        &[
            json!({"method": "resources/list", "params": {"_meta": meta}}),
            json!({"method": "resources/read", "params": {"_meta": meta, "uri": "file:///notes/todo.md"}}),
            json!({"method": "resources/templates/list", "params": {"_meta": meta}}),
            json!({"method": "resources/read", "params": {"_meta": meta, "uri": "file:///../x"}}),
            json!({"method": "resources/read", "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}, "uri": "file:///notes/todo.md"}}),
        ],
    )
    .await;
    // Cache hints, as 2026-07-28 requires of these results: files change and are one
    // root's; the template is everyone's.
    for (answer, ttl, scope) in [
        (&answers[0], json!(0), "private"),
        (&answers[1], json!(0), "private"),
        (&answers[2], json!(300_000), "public"),
    ] {
        assert_eq!(
            (
                &answer["result"]["ttlMs"],
                answer["result"]["cacheScope"].as_str()
            ),
            (&ttl, Some(scope))
        );
    }
    for answer in &answers[..3] {
        assert_eq!(answer["result"]["resultType"], "complete", "{answer}");
        assert_eq!(
            answer["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
            "wasm-toolhost"
        );
    }
    assert_eq!(answers[1]["result"]["contents"][0]["text"], "- ship it\n");
    assert_refused(&answers[3], INVALID_PARAMS, &["\"..\" segment"]);
    assert_refused(&answers[4], INVALID_PARAMS, &["clientCapabilities"]);
}

#[tokio::test]
async fn read_params_are_checked() {
    let disk = disk();
    let answers = serve(
        server_over(disk_options(&disk)),
        &[
            json!({"method": "resources/read", "params": {}}),
            json!({"method": "resources/read", "params": {"uri": 5}}),
            json!({"method": "resources/read"}),
        ],
    )
    .await;
    assert_refused(&answers[0], INVALID_PARAMS, &["\"uri\" is required"]);
    assert_refused(
        &answers[1],
        INVALID_PARAMS,
        &["\"uri\" must be a string", "got number"],
    );
    assert_refused(&answers[2], INVALID_PARAMS, &["\"uri\" is required"]);
}
