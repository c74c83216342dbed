//! toolhost:plugin@0.3.0 over MCP stdio: a plugin tool's rich result arrives as MCP
//! content blocks (the `rich` test plugin), and `--plugin-ask` is in the help.

use serde_json::json;

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
    }
}
