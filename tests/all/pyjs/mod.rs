//! The example plugins written in Python (componentize-py) and JavaScript
//! (ComponentizeJS), built by `scripts/build-pyjs-plugins` for toolhost:plugin@0.3.0,
//! next to each other in one registry: they load, answer exactly, raise argument errors
//! of the right kind, return rich results (a text block and a PNG image, decoded here)
//! and ask the user to confirm through the `interaction` import (granted, declined,
//! nobody to ask, not allowed by the operator); both (world `rich-plugin`) offer a
//! resource, a resource template and a prompt. The code tools run_javascript and
//! run_python (code_tools.rs) run a model's program that calls the registry's tools.
//!
//! The build needs toolchains from PyPI and npm. `scripts/test` installs them and sets
//! `TOOLHOST_REQUIRE_PYJS=1`, so a missing toolchain fails the test there; a plain
//! `cargo test` without them skips it and says so on stderr.
#![allow(
    clippy::print_stderr,
    reason = "a skipped test and the toolchain build say so on stderr, where cargo test shows them"
)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde_json::{json, Value};
use toolhost::catalog::{
    PromptArgument, PromptDefinition, PromptMessage, PromptResult, ResourceContents, ResourceEntry,
    ResourceError, ResourcePage, ResourceTemplate, Role,
};
use toolhost::registry::{
    CallContext, ContentBlock, Environment, Interaction, InteractionFuture, Media, Registry,
    ResourceBody, ToolAnnotations, ToolCall, ToolError, ToolResult,
};
use toolhost_plugin::cache::CompileSource;
use toolhost_plugin::http_policy::parse_allowed_net;
use toolhost_plugin::{HttpPolicy, LoadReport, PluginHost, PluginHostConfig};

use crate::common::cache_dir;

/// The definitions deadline these tests load the interpreters under: an interpreter's
/// instantiation and `definitions` take well under a second alone, but the suite loads
/// them while other tests compile and run on the same cores, where the default 5 s
/// (`DefinitionLimits::timeout`, a guard against a plugin that never answers) has been
/// overrun; none of these tests is about that deadline.
fn loaded_machine_limits() -> toolhost_plugin::limits::DefinitionLimits {
    toolhost_plugin::limits::DefinitionLimits::default()
        .with_timeout(std::time::Duration::from_secs(60))
}

mod catalog;
mod code_tools;
mod rich;

/// The components: `(textstats.wasm, greeting.wasm)`, built (or found up to date) by the
/// build script; `None` when a toolchain is missing and the test may be skipped.
fn built_components() -> Option<(PathBuf, PathBuf)> {
    built_all().map(|built| (built.textstats, built.greeting))
}

/// Every component `scripts/build-pyjs-plugins` builds.
struct Built {
    textstats: PathBuf,
    greeting: PathBuf,
    run_javascript: PathBuf,
    run_python: PathBuf,
}

/// Every component, built (or found up to date) by the build script; `None` when a
/// toolchain is missing and the test may be skipped.
fn built_all() -> Option<Built> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent");
    let started = Instant::now();
    let output = Command::new("bash")
        .arg(root.join("scripts/build-pyjs-plugins"))
        .output()
        .expect("run bash scripts/build-pyjs-plugins");
    let stderr = String::from_utf8_lossy(&output.stderr);
    eprintln!("{stderr}build-pyjs-plugins took {:.1?}", started.elapsed());
    match output.status.code() {
        Some(0) => {}
        Some(3 | 4) if std::env::var_os("TOOLHOST_REQUIRE_PYJS").is_none() => {
            eprintln!(
                "SKIPPED: the Python/JavaScript toolchains are missing (run `bash \
                 scripts/build-pyjs-plugins --install`, or scripts/test, which does)"
            );
            return None;
        }
        other => panic!("scripts/build-pyjs-plugins failed ({other:?}):\n{stderr}"),
    }
    let stdout = String::from_utf8(output.stdout).expect("paths are UTF-8");
    let paths: Vec<PathBuf> = stdout.lines().map(PathBuf::from).collect();
    match paths.as_slice() {
        [textstats, greeting, run_javascript, run_python] => Some(Built {
            textstats: textstats.clone(),
            greeting: greeting.clone(),
            run_javascript: run_javascript.clone(),
            run_python: run_python.clone(),
        }),
        other => panic!("build-pyjs-plugins printed {other:?}, not the four components"),
    }
}

/// A registry with only the two plugins, loaded through the shared compile cache;
/// greeting may reach `origin` over HTTP (its manifest asks, the operator allows it and
/// the loopback network, as an operator would for a local service). Both manifests ask
/// to ask the user (`[grants] ask = true`); the operator allows it when `ask`.
fn load(
    textstats: &Path,
    greeting: &Path,
    origin: &str,
    ask: bool,
) -> (Arc<Registry>, LoadReport, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("plugins dir");
    std::fs::copy(textstats, dir.path().join("textstats.wasm")).expect("copy textstats");
    std::fs::copy(greeting, dir.path().join("greeting.wasm")).expect("copy greeting");
    std::fs::write(
        dir.path().join("greeting.toml"),
        format!("[grants]\nhttp = [\"{origin}\"]\nask = true\n[config.ACCEPT]\nrequired = false\n"),
    )
    .expect("greeting.toml");
    std::fs::write(dir.path().join("textstats.toml"), "[grants]\nask = true\n")
        .expect("textstats.toml");
    let registry = Arc::new(Registry::new());
    let host = PluginHost::new(
        PluginHostConfig::builder()
            .cache_dir(Some(cache_dir()))
            .definition_limits(loaded_machine_limits())
            .http(
                HttpPolicy::default()
                    .with_allow(vec![origin.parse().expect("host pattern")])
                    .with_allow_nets(vec![parse_allowed_net("127.0.0.1").expect("net")]),
            )
            .plugin_ask(ask)
            .build(),
    )
    .expect("plugin host");
    let started = Instant::now();
    let report = host.load_dir(dir.path(), &registry);
    eprintln!(
        "loaded the Python and JavaScript plugins in {:.1?}: {}",
        started.elapsed(),
        report
            .loaded
            .iter()
            .map(|plugin| format!("{} {}", plugin.name, plugin.compile))
            .collect::<Vec<_>>()
            .join(", ")
    );
    (registry, report, dir)
}

async fn call(registry: &Registry, tool: &str, arguments: Value) -> Result<Value, ToolError> {
    call_with(registry, &CallContext::new(), tool, arguments)
        .await
        .map(|result| {
            assert!(result.blocks.is_empty(), "{:?}", result.blocks);
            result.content
        })
}

async fn call_with(
    registry: &Registry,
    ctx: &CallContext,
    tool: &str,
    arguments: Value,
) -> Result<ToolResult, ToolError> {
    registry
        .dispatch(
            ctx,
            &ToolCall::new(tool, arguments.to_string()),
            &Environment::generate(),
        )
        .await
}

/// A user who answers every confirmation with `accept`, and the messages they saw.
struct User {
    accept: bool,
    seen: Mutex<Vec<String>>,
}

impl User {
    fn new(accept: bool) -> Arc<Self> {
        Arc::new(Self {
            accept,
            seen: Mutex::new(Vec::new()),
        })
    }

    fn seen(&self) -> Vec<String> {
        self.seen.lock().expect("seen").clone()
    }
}

impl Interaction for User {
    fn confirm(&self, message: String) -> InteractionFuture<bool> {
        self.seen.lock().expect("seen").push(message);
        let accept = self.accept;
        Box::pin(async move { Ok(accept) })
    }

    fn ask(&self, message: String, _schema: Value) -> InteractionFuture<Option<Value>> {
        self.seen.lock().expect("seen").push(message);
        Box::pin(async { Ok(None) })
    }
}

fn asking(user: &Arc<User>) -> CallContext {
    CallContext::new().with_interaction(Arc::clone(user) as Arc<dyn Interaction>)
}

fn text(text: &str) -> ContentBlock {
    ContentBlock::text(text)
}

fn failed(tool: &str, message: &str) -> Result<ToolResult, ToolError> {
    Err(ToolError::Failed {
        tool: tool.into(),
        message: message.into(),
    })
}

fn invalid(tool: &str, message: &str) -> Result<Value, ToolError> {
    Err(ToolError::InvalidArguments {
        tool: tool.into(),
        message: message.into(),
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn python_and_javascript_plugins_load_answer_exactly_and_are_cached() {
    let Some((textstats, greeting)) = built_components() else {
        return;
    };
    let (port, seen) = hello_server();
    let origin = format!("http://127.0.0.1:{port}");
    let (registry, report, _first_dir) = load(&textstats, &greeting, &origin, true);
    assert!(report.failed.is_empty(), "{:?}", report.failed);
    assert_eq!(
        registry.names(),
        [
            "greeting",
            "js_fetch",
            "flag",
            "greet_confirmed",
            "text_stats",
            "word_chart",
            "count_confirmed"
        ]
    );
    let all = registry.definitions();
    let definitions: Vec<_> = ["greeting", "js_fetch", "text_stats"]
        .iter()
        .map(|name| {
            all.iter()
                .find(|d| d.name == *name)
                .expect("defined")
                .clone()
        })
        .collect();
    assert_eq!(definitions[2].parameters["required"], json!(["text"]));
    assert_eq!(
        definitions[0].parameters["properties"]["language"]["enum"],
        json!(["en", "fr", "de", "es"])
    );
    // The tool metadata, from each language's bindings.
    assert_eq!(definitions[0].title.as_deref(), Some("Greet someone"));
    assert_eq!(
        definitions[0].annotations,
        ToolAnnotations {
            read_only_hint: Some(true),
            destructive_hint: None,
            idempotent_hint: Some(true),
            open_world_hint: Some(false),
        }
    );
    assert_eq!(definitions[0].output_schema, None);
    assert_eq!(definitions[1].title.as_deref(), Some("Fetch a URL"));
    assert_eq!(definitions[2].title.as_deref(), Some("Text statistics"));
    assert_eq!(definitions[2].annotations.read_only_hint, Some(true));
    assert_eq!(
        definitions[2]
            .output_schema
            .as_ref()
            .map(|s| &s["required"]),
        Some(&json!(["characters", "words", "lines", "top_words"]))
    );
    // ComponentizeJS's default build (fetch included) imports wasi:http and loads; with
    // no [grants] http its requests would all be refused.
    let info = PluginHost::new(
        PluginHostConfig::builder()
            .cache_dir(Some(cache_dir()))
            .build(),
    )
    .expect("plugin host")
    .inspect(&greeting)
    .expect("inspect greeting");
    assert!(
        info.imports
            .iter()
            .any(|i| i.starts_with("wasi:http/outgoing-handler@0.2.")),
        "{:?}",
        info.imports
    );
    assert!(info.http.is_empty(), "no manifest next to it: no grant");

    // Python.
    assert_eq!(
        call(
            &registry,
            "text_stats",
            json!({"text": "The cat and the hat\nthe end", "top": 2})
        )
        .await,
        Ok(json!({
            "characters": 27,
            "words": 7,
            "lines": 2,
            "top_words": [["the", 3], ["and", 1]],
        }))
    );
    assert_eq!(
        call(&registry, "text_stats", json!({"text": 5})).await,
        invalid(
            "text_stats",
            r#"argument "text" must be a string, got number"#
        )
    );
    assert_eq!(
        call(&registry, "text_stats", json!({"text": "a", "top": 99})).await,
        invalid(
            "text_stats",
            r#"argument "top" must be from 0 to 20, got 99"#
        )
    );
    // Checked by the host before the plugin runs.
    assert_eq!(
        call(&registry, "text_stats", json!({})).await,
        invalid("text_stats", r#"argument "text" is required"#)
    );

    // JavaScript.
    assert_eq!(
        call(
            &registry,
            "greeting",
            json!({"name": "Ada", "language": "fr"})
        )
        .await,
        Ok(json!("Bonjour, Ada!"))
    );
    assert_eq!(
        call(&registry, "greeting", json!({"name": " Ada "})).await,
        Ok(json!("Hello, Ada!"))
    );
    assert_eq!(
        call(
            &registry,
            "greeting",
            json!({"name": "Ada", "language": "xx"})
        )
        .await,
        invalid(
            "greeting",
            r#"argument "language" must be one of "en", "fr", "de", "es", got "xx""#
        )
    );
    assert_eq!(
        call(&registry, "greeting", json!({"name": 7})).await,
        invalid(
            "greeting",
            r#"argument "name" must be a string, got number"#
        )
    );

    // JavaScript's standard fetch, through the same wasi:http grant as a Rust plugin's:
    // the granted local server answers; another host is refused (the host's log says
    // why) with nothing sent. ComponentizeJS's fetch does not follow redirects: it
    // returns the 302, and the host the redirect names is never asked.
    assert_eq!(
        call(
            &registry,
            "js_fetch",
            json!({ "url": format!("{origin}/hello") })
        )
        .await,
        Ok(json!({"status": 200, "body": "hello"}))
    );
    assert_eq!(seen.load(Ordering::SeqCst), 1);
    assert_eq!(
        call(&registry, "js_fetch", json!({"url": "http://10.1.2.3/"})).await,
        Err(ToolError::Failed {
            tool: "js_fetch".into(),
            message: "the request failed or the host refused it (this tool may only reach the hosts it was granted): NetworkError when attempting to fetch resource".into()
        })
    );
    assert_eq!(seen.load(Ordering::SeqCst), 1, "nothing reached the server");
    assert_eq!(
        call(
            &registry,
            "js_fetch",
            json!({ "url": format!("{origin}/away") })
        )
        .await,
        Ok(json!({"status": 302, "body": ""}))
    );
    assert_eq!(seen.load(Ordering::SeqCst), 2);

    catalog::resources_and_prompts(&registry).await;
    rich::rich_results_and_confirmations(&registry).await;

    // Calls in parallel each get their own instance and the right answer.
    let calls = (0..8).map(|i| {
        let registry = Arc::clone(&registry);
        tokio::spawn(async move {
            let text = "word ".repeat(i + 1);
            let stats = call(&registry, "text_stats", json!({"text": text, "top": 0})).await;
            let hello = call(&registry, "greeting", json!({"name": format!("n{i}")})).await;
            (i, stats, hello)
        })
    });
    for handle in calls {
        let (i, stats, hello) = handle.await.expect("task");
        assert_eq!(stats.expect("stats")["words"], json!(i + 1));
        assert_eq!(hello, Ok(json!(format!("Hello, n{i}!"))));
    }

    // A Python component is ~18 MB of WebAssembly (an interpreter and its standard
    // library); compiling it takes tens of seconds, so a second load must come from the
    // compile cache. (One test, so a cold run compiles each component once.)
    let (without_ask, again, _dir) = load(&textstats, &greeting, &origin, false);
    assert!(again.failed.is_empty(), "{:?}", again.failed);
    assert_eq!(again.loaded.len(), 2);
    // The manifests ask to ask, but this operator does not allow it: the plugins load,
    // every question is refused (not-allowed) before it reaches the user, and each
    // plugin fails its call saying so.
    let user = User::new(true);
    let not_allowed = |plugin: &str| {
        format!(
            "could not ask the user: plugin {plugin} may not ask the user: its manifest must say `[grants] ask = true` and the operator must allow it (--plugin-ask); go on without asking, or fail and say what you need"
        )
    };
    assert_eq!(
        call_with(
            &without_ask,
            &asking(&user),
            "count_confirmed",
            json!({"text": "a b"})
        )
        .await,
        failed("count_confirmed", &not_allowed("textstats"))
    );
    assert_eq!(
        call_with(
            &without_ask,
            &asking(&user),
            "greet_confirmed",
            json!({"name": "Ada"})
        )
        .await,
        failed("greet_confirmed", &not_allowed("greeting"))
    );
    assert!(user.seen().is_empty(), "{:?}", user.seen());
    for plugin in &again.loaded {
        assert!(
            matches!(plugin.compile, CompileSource::CacheHit(_)),
            "{}: {}",
            plugin.name,
            plugin.compile
        );
    }
}

/// A server on 127.0.0.1 answering `/hello` with `hello` and `/away` with a redirect to
/// `http://denied.test/`; it counts the requests it gets.
fn hello_server() -> (u16, Arc<AtomicUsize>) {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
    let port = listener.local_addr().expect("local addr").port();
    let seen = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&seen);
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let mut reader = BufReader::new(stream.try_clone().expect("clone"));
            let mut line = String::new();
            let _ = reader.read_line(&mut line);
            loop {
                let mut header = String::new();
                match reader.read_line(&mut header) {
                    Ok(n) if n > 0 && !header.trim().is_empty() => {}
                    _ => break,
                }
            }
            count.fetch_add(1, Ordering::SeqCst);
            let answer = if line.starts_with("GET /hello ") {
                "HTTP/1.1 200 OK\r\ncontent-length: 5\r\nconnection: close\r\n\r\nhello"
            } else if line.starts_with("GET /away ") {
                "HTTP/1.1 302 Found\r\nlocation: http://denied.test/\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
            } else {
                "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
            };
            let _ = stream.write_all(answer.as_bytes());
        }
    });
    (port, seen)
}
