//! Layer 3: layers 1 and 2 served to any MCP client over stdio, which is what `host run`
//! does (without its flags, logging and exit codes).
//!
//! ```sh
//! cargo run -p toolhost-mcp --example stdio_server -- ./notes plugins/dist
//! ```
//!
//! Then talk JSON-RPC on stdin, one message per line, for example
//! `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`. Logs would go to stderr: stdout is
//! the protocol.
#![allow(
    clippy::print_stdout,
    reason = "an example program: it shows what it does on stdout"
)]

use std::path::Path;
use std::sync::Arc;

use toolhost::registry::Registry;
use toolhost::tools::{register_vfs_tools, VfsToolOptions};
use toolhost::vfs::OsStorage;
use toolhost_mcp::McpServer;
use toolhost_plugin::{PluginHost, PluginHostConfig};

/// The registry of the file tools over `root` and the plugins of `plugins` (if given),
/// with the plugin host that runs them.
fn toolset(
    root: &Path,
    plugins: Option<&Path>,
) -> Result<(Arc<Registry>, Option<PluginHost>), Box<dyn std::error::Error>> {
    let registry = Registry::new();
    let options = VfsToolOptions::new(Arc::new(OsStorage::open(root)?));
    let policy = options.policy();
    register_vfs_tools(&registry, options)?;
    let host = match plugins {
        Some(dir) => {
            let host = PluginHost::new(PluginHostConfig::builder().file_policy(policy).build())?;
            host.load_dir(dir, &registry);
            Some(host)
        }
        None => None,
    };
    Ok((Arc::new(registry), host))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let root = args.next().unwrap_or_else(|| ".".to_owned());
    let plugins = args.next();
    let (registry, _plugins) = toolset(Path::new(&root), plugins.as_deref().map(Path::new))?;
    // Until stdin ends; calls in flight are answered first.
    McpServer::new(registry).serve_stdio().await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #[tokio::test(flavor = "multi_thread")]
    async fn the_example_serves_file_and_plugin_tools() {
        let root = tempfile::tempdir().expect("a temporary directory");
        let plugins = tempfile::tempdir().expect("a temporary directory");
        toolhost_tests::install(plugins.path(), &["greet"]).expect("greet is built");
        let (registry, _host) =
            super::toolset(root.path(), Some(plugins.path())).expect("the tool set");
        let input = concat!(
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
            "\n",
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"greet","arguments":{"name":"Ada"}}}"#,
            "\n",
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"write_file","arguments":{"path":"a.md","content":"hi"}}}"#,
            "\n",
        );
        let mut output = Vec::new();
        super::McpServer::new(registry)
            .serve(input.as_bytes(), &mut output)
            .await
            .expect("served");
        let output = String::from_utf8(output).expect("UTF-8");
        // Answers come in the order calls finish; find each by its id.
        let answer = |id: u32| {
            output
                .lines()
                .find(|line| line.contains(&format!(r#""id":{id},"#)))
                .unwrap_or_else(|| panic!("no answer to {id}: {output}"))
        };
        assert_eq!(output.lines().count(), 3, "{output}");
        assert!(answer(2).contains(r#""text":"Hello, Ada!""#), "{output}");
        assert!(answer(3).contains(r#""isError":false"#), "{output}");
        assert_eq!(
            std::fs::read_to_string(root.path().join("a.md")).expect("written"),
            "hi"
        );
    }
}
