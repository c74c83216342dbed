//! toolhost:plugin@0.3.0 over MCP stdio: a plugin tool's rich result arrives as MCP
//! content blocks (the `rich` test plugin), a plugin samples the client's model only
//! under `--plugin-sampling`, and `--plugin-ask` and `--plugin-sampling` are in the help.

use serde_json::{json, Value};

use super::host;
use super::mcp::Server;

#[test]
fn a_plugin_image_arrives_as_an_mcp_image_block() {
    let root = tempfile::tempdir().unwrap();
    let plugins = tempfile::tempdir().unwrap();
    toolhost_tests::install(plugins.path(), &["rich", "greet"]).unwrap();
    let cache = tempfile::tempdir().unwrap();
    let mut server = Server::start(
        root.path(),
        &[
            "--plugins",
            plugins.path().to_str().unwrap(),
            "--cache-dir",
            cache.path().to_str().unwrap(),
        ],
    );
    server.request(
        1,
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}),
    );
    server.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let response = server.request(2, "tools/call", json!({"name": "pixel", "arguments": {}}));
    assert_eq!(
        response["result"],
        json!({
            "content": [
                {"type": "text", "text": "one red pixel"},
                {
                    "type": "image",
                    "data": "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC",
                    "mimeType": "image/png"
                }
            ],
            "isError": false
        })
    );
    let mixed = server.request(3, "tools/call", json!({"name": "mixed", "arguments": {}}));
    assert_eq!(
        mixed["result"]["content"],
        json!([
            {"type": "text", "text": "five parts"},
            {"type": "audio", "data": "UklGRg==", "mimeType": "audio/wav"},
            {"type": "resource_link", "uri": "plugin://rich/notes/a.txt", "name": "a.txt", "mimeType": "text/plain", "description": "A note."},
            {"type": "resource", "resource": {"uri": "plugin://rich/notes/b.txt", "mimeType": "text/plain", "text": "bee"}},
            {"type": "resource", "resource": {"uri": "plugin://rich/data/c.bin", "mimeType": "application/octet-stream", "blob": "AAH/"}},
        ])
    );
    let refused = server.request(
        4,
        "tools/call",
        json!({"name": "picture", "arguments": {"mime": "text/html"}}),
    );
    assert_eq!(refused["result"]["isError"], true);
    assert!(
        refused["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains(
                "the plugin returned an image of type `text/html`, which the host does not pass on"
            ),
        "{refused}"
    );
    // A plain result keeps its shape.
    assert_eq!(
        server.call(5, "greet", json!({"name": "Ada"})),
        ("Hello, Ada!".to_owned(), false)
    );
    let (code, _, _) = server.finish();
    assert_eq!(code, Some(0));
}

#[test]
fn plugin_ask_is_in_the_help_of_run_and_serve() {
    for command in ["run", "serve"] {
        let output = host().args([command, "--help"]).output().unwrap();
        let help = String::from_utf8(output.stdout).unwrap();
        assert!(help.contains("--plugin-ask"), "{command}: {help}");
        assert!(help.contains("[grants] ask = true"), "{command}: {help}");
        assert!(help.contains("--plugin-sampling"), "{command}: {help}");
        assert!(help.contains("[grants] sampling"), "{command}: {help}");
    }
}

/// `host inspect` of a 0.3.0 plugin shows its prompts (arguments, `*` required), where its
/// resources live and their templates, and whether it asks to ask the user (with the flag
/// the host needs); a plugin without a manifest asks nothing and shows no such line.
#[test]
fn inspect_shows_prompts_resource_templates_and_asking() {
    let plugins = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    toolhost_tests::install(plugins.path(), &["conformance", "rich"]).unwrap();
    let inspect = |name: &str, json: bool| {
        let wasm = plugins.path().join(format!("{name}.wasm"));
        let mut command = host();
        command
            .arg("inspect")
            .arg(&wasm)
            .arg("--cache-dir")
            .arg(cache.path());
        if json {
            command.arg("--json");
        }
        let out = command.output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };

    let report = inspect("conformance", false);
    for expected in [
        "  http: none\n  ask the user: yes (the host must allow it: --plugin-ask; else every question is refused)\n  sample the client's model: yes (max_requests = 1 per call, max_tokens = 100 per request; the host must allow it: --plugin-sampling; else every request is refused)\n  config: none\n",
        "  prompts (4):
    test_simple_prompt                  A simple prompt.
    test_prompt_with_arguments          A prompt with arguments. (arg1*, arg2*)
    test_prompt_with_embedded_resource  A prompt with an embedded resource. (resourceUri*)
    test_prompt_with_image              A prompt with an image.
  resources: under test:// (1 template)
    test://template/{id}/data  template-data (application/json)
  imports (",
    ] {
        assert!(report.contains(expected), "no {expected:?} in:\n{report}");
    }
    let info: Value = serde_json::from_str(&inspect("conformance", true)).unwrap();
    assert_eq!(
        info["ask"],
        json!({"asks": true, "allowed_by_default_host": false})
    );
    assert_eq!(
        info["sampling"],
        json!({"max_requests": 1, "max_tokens": 100, "allowed_by_default_host": false})
    );
    assert_eq!(
        info["resources"],
        json!({
            "offered": true,
            "namespace": "test://",
            "templates": [{"uri_template": "test://template/{id}/data", "name": "template-data", "mime_type": "application/json"}],
        })
    );
    assert_eq!(info["prompts"].as_array().unwrap().len(), 4);
    assert_eq!(
        info["prompts"][1],
        json!({"name": "test_prompt_with_arguments", "description": "A prompt with arguments.", "arguments": [
            {"name": "arg1", "description": "First test argument", "required": true},
            {"name": "arg2", "description": "Second test argument", "required": true},
        ]})
    );

    // No manifest: the default namespace, and no asking.
    let report = inspect("rich", false);
    assert!(
        report.contains(
            "  prompts (1):
    rich_summary  Summarize a topic. (topic*)
  resources: under plugin://rich/ (1 template)
    plugin://rich/items/{id}  item (text/plain)
"
        ),
        "{report}"
    );
    assert!(!report.contains("ask the user"), "{report}");
    assert!(!report.contains("sample the client's model"), "{report}");
    let info: Value = serde_json::from_str(&inspect("rich", true)).unwrap();
    assert_eq!(
        info["ask"],
        json!({"asks": false, "allowed_by_default_host": false})
    );
    assert_eq!(info["sampling"], Value::Null);
}

/// `host run` over stdio with the conformance plugin (whose manifest grants `sampling`):
/// with `--plugin-sampling` its `test_sampling` sends the client a
/// `sampling/createMessage` and returns the model's answer; without the flag nothing is
/// sent and the tool fails saying which flag is missing.
#[test]
fn a_plugin_samples_the_clients_model_only_under_plugin_sampling() {
    let plugins = tempfile::tempdir().unwrap();
    toolhost_tests::install(plugins.path(), &["conformance"]).unwrap();
    let cache = tempfile::tempdir().unwrap();
    for allowed in [true, false] {
        let root = tempfile::tempdir().unwrap();
        let mut args = vec![
            "--plugins",
            plugins.path().to_str().unwrap(),
            "--cache-dir",
            cache.path().to_str().unwrap(),
        ];
        if allowed {
            args.push("--plugin-sampling");
        }
        let mut server = Server::start(root.path(), &args);
        server.request(
            1,
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {"sampling": {}}, "clientInfo": {"name": "t", "version": "1"}}),
        );
        server.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        server.send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "test_sampling", "arguments": {"prompt": "Say hi"}}}));
        let first = server.receive();
        if allowed {
            assert_eq!(first["method"], "sampling/createMessage", "{first}");
            assert_eq!(
                first["params"],
                json!({"messages": [{"role": "user", "content": {"type": "text", "text": "Say hi"}}], "maxTokens": 100})
            );
            server.send(json!({"jsonrpc": "2.0", "id": first["id"], "result": {
                "role": "assistant", "content": {"type": "text", "text": "Hi!"},
                "model": "test-model", "stopReason": "endTurn"}}));
            let answer = server.receive();
            assert_eq!(answer["id"], 2, "{answer}");
            assert_eq!(
                answer["result"]["content"],
                json!([{"type": "text", "text": "LLM response: Hi!"}])
            );
            assert_eq!(answer["result"]["isError"], false);
        } else {
            assert_eq!(first["id"], 2, "nothing may be sent to the client: {first}");
            assert_eq!(first["result"]["isError"], true);
            let text = first["result"]["content"][0]["text"].as_str().unwrap();
            assert!(
                text.contains("sampling failed: plugin conformance may not ask the client's model: its manifest must say `[grants] sampling = true` (or `sampling = { max_requests = N, max_tokens = M }`) and the operator must allow it (--plugin-sampling)"),
                "{text}"
            );
        }
        let (code, _, _) = server.finish();
        assert_eq!(code, Some(0));
    }
}

/// `host inspect` shows a plugin's `[grants] tools`, and that the default host allows
/// none of them (`--plugin-tools` is a flag of `run`, `serve`, `tools` and `call`).
#[test]
fn inspect_shows_the_tools_a_plugin_may_call() {
    let plugins = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    toolhost_tests::install(plugins.path(), &["hostile_compose"]).unwrap();
    let inspect = |json: bool| {
        let mut command = host();
        command
            .arg("inspect")
            .arg(plugins.path().join("hostile_compose.wasm"))
            .arg("--cache-dir")
            .arg(cache.path());
        if json {
            command.arg("--json");
        }
        let out = command.output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let report = inspect(false);
    assert!(
        report.contains("  call the registry's tools: grep, read_file, greet, spin, list, b_list, write_file (max_tool_calls = 40 per call; the host must allow each: --plugin-tools NAME; else every call is refused)\n"),
        "{report}"
    );
    let info: Value = serde_json::from_str(&inspect(true)).unwrap();
    assert_eq!(
        info["registry_tools"],
        json!({"tools": "grep, read_file, greet, spin, list, b_list, write_file", "max_tool_calls": 40, "allowed_by_default_host": null})
    );
}

/// `--plugin-tools` reaches the plugins: a composing plugin calls `greet` when the flag
/// names it, and is refused without it.
#[test]
fn plugin_tools_lets_a_composing_plugin_call_the_tools_it_names() {
    let plugins = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    toolhost_tests::install(plugins.path(), &["greet", "hostile_compose"]).unwrap();
    let call = |flags: &[&str]| {
        let out = host()
            .arg("call")
            .arg("--no-builtins")
            .arg("--plugins")
            .arg(plugins.path())
            .arg("--cache-dir")
            .arg(cache.path())
            .args(flags)
            .arg("call_once")
            .arg(json!({"tool": "greet", "arguments": r#"{"name":"Ada"}"#}).to_string())
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice::<Value>(&out.stdout).unwrap()
    };
    assert_eq!(
        call(&["--plugin-tools", "greet"]),
        json!({"result": "Hello, Ada!"})
    );
    let refused = call(&[]);
    assert_eq!(refused["error"], "failed");
    assert_eq!(
        refused["message"],
        "greet: tool greet is not granted to plugin hostile_compose: its manifest must name it in `[grants] tools` and the operator must allow it (`--plugin-tools greet`); it may call: (none)"
    );
}
