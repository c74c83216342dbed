//! Layer 2: layer 1 plus third-party tools as WebAssembly components. The plugins'
//! tools land in the same registry as the built-in file tools, after them.
//!
//! ```sh
//! scripts/build-plugins        # plugins/dist: greet, divide, wordcount
//! cargo run -p toolhost-plugin --example with_plugins -- plugins/dist ./notes
//! ```
//!
//! It loads every plugin of the directory (a file that fails is reported, the rest load),
//! lists the tools, and calls `greet` if a plugin offers it.
#![allow(
    clippy::print_stdout,
    reason = "an example program: it shows what it does on stdout"
)]

use std::path::Path;
use std::sync::Arc;

use toolhost::registry::{CallContext, Environment, Registry, ToolCall};
use toolhost::tools::{register_vfs_tools, VfsToolOptions};
use toolhost::vfs::OsStorage;
use toolhost_plugin::{PluginHost, PluginHostConfig};

/// Registers the file tools over `root` and the plugins of `plugins`; returns the tool
/// names and `greet`'s answer (when a plugin offers it).
async fn run(
    plugins: &Path,
    root: &Path,
) -> Result<(Vec<String>, Option<String>), Box<dyn std::error::Error>> {
    let registry = Registry::new();
    let options = VfsToolOptions::new(Arc::new(OsStorage::open(root)?));
    // Plugins see files only through a grant, checked with the same policy as the tools.
    let config = PluginHostConfig::builder()
        .file_policy(options.policy())
        .build();
    register_vfs_tools(&registry, options)?;
    // One engine, epoch ticker and compile cache for all plugins; keep it alive as long
    // as the registry (the handlers hold what they need, so dropping it is safe too).
    let host = PluginHost::new(config)?;
    let report = host.load_dir(plugins, &registry);
    for plugin in &report.loaded {
        println!("loaded {}: {}", plugin.name, plugin.tools.join(", "));
    }
    for failure in &report.failed {
        // The error names the file; `{:#}`-style chains hold the OS error, if any.
        println!("skipped: {}", toolhost::error::ErrorChain(&failure.error));
    }
    let greeting = if registry.has("greet") {
        let result = registry
            .dispatch(
                &CallContext::new(),
                &ToolCall::new("greet", r#"{"name":"Ada"}"#),
                &Environment::generate(),
            )
            .await?;
        Some(result.content.to_string())
    } else {
        None
    };
    Ok((registry.names(), greeting))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let plugins = args.next().unwrap_or_else(|| "plugins/dist".to_owned());
    let root = args.next().unwrap_or_else(|| ".".to_owned());
    let (names, greeting) = run(Path::new(&plugins), Path::new(&root)).await?;
    println!("tools: {}", names.join(", "));
    if let Some(greeting) = greeting {
        println!("greet -> {greeting}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[tokio::test(flavor = "multi_thread")]
    async fn the_example_runs_on_the_built_greet_plugin() {
        let plugins = tempfile::tempdir().expect("a temporary directory");
        toolhost_tests::install(plugins.path(), &["greet"]).expect("greet is built");
        let root = tempfile::tempdir().expect("a temporary directory");
        let (names, greeting) = super::run(plugins.path(), root.path())
            .await
            .expect("the example runs");
        assert_eq!(names.first().map(String::as_str), Some("read_file"));
        assert_eq!(names.last().map(String::as_str), Some("greet"));
        assert_eq!(greeting.as_deref(), Some("\"Hello, Ada!\""));
    }
}
