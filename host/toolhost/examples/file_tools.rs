//! Layer 1: the registry and the built-in file tools alone, no WebAssembly runtime, no
//! MCP: what a Rust agent embeds to offer a model file tools over one directory.
//!
//! ```sh
//! cargo run -p toolhost --example file_tools -- ./notes
//! ```
//!
//! It registers the file tools over the directory, prints the definitions the model would
//! be offered, then dispatches the calls a model would make: write a file, list, read,
//! and one bad call, whose error is a result for the model, not a crash.
#![allow(
    clippy::print_stdout,
    reason = "an example program: it shows what it does on stdout"
)]

use std::path::Path;
use std::sync::Arc;

use toolhost::registry::{CallContext, Environment, Registry, ToolCall, ToolError};
use toolhost::tools::{register_vfs_tools, VfsToolOptions};
use toolhost::vfs::OsStorage;

/// Sets up the file tools over `root` and makes four calls; returns what each returned.
async fn run(root: &Path) -> Result<Vec<String>, Box<dyn std::error::Error>> {
    let registry = Registry::new();
    register_vfs_tools(
        &registry,
        VfsToolOptions::new(Arc::new(OsStorage::open(root)?)),
    )?;
    // What the agent offers the model: name, description and JSON Schema of each tool.
    for definition in registry.definitions() {
        println!("offered: {}", definition.name);
    }
    // One session, one turn per model reply (Environment::generate() makes fresh ids).
    let env = Environment::generate();
    let ctx = CallContext::new();
    let calls = [
        (
            "write_file",
            r#"{"path":"todo.md","content":"- ship it\n"}"#,
        ),
        ("list_files", "{}"),
        ("read_file", r#"{"path":"todo.md"}"#),
        ("read_file", r#"{"path":"../etc/passwd"}"#),
    ];
    let mut answers = Vec::new();
    for (name, arguments) in calls {
        let answer = match registry
            .dispatch(&ctx, &ToolCall::new(name, arguments), &env)
            .await
        {
            Ok(result) => result.content.to_string(),
            // Every failure is a ToolError whose text is written for the model.
            Err(err @ ToolError::InvalidArguments { .. }) => format!("error for the model: {err}"),
            Err(err) => return Err(err.into()),
        };
        println!("{name} {arguments} -> {answer}");
        answers.push(answer);
    }
    Ok(answers)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = std::env::args().nth(1).unwrap_or_else(|| ".".to_owned());
    run(Path::new(&root)).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #[tokio::test]
    async fn the_example_runs_in_a_fresh_directory() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let answers = super::run(dir.path()).await.expect("the example runs");
        assert!(answers[1].contains("todo.md"), "{answers:?}");
        assert!(answers[2].contains("- ship it"), "{answers:?}");
        assert!(
            answers[3].starts_with(
                "error for the model: read_file: argument \"path\" contains a \"..\" segment"
            ),
            "{answers:?}"
        );
        assert_eq!(
            std::fs::read_to_string(dir.path().join("todo.md")).expect("written"),
            "- ship it\n"
        );
    }
}
