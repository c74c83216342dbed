//! The code tools, run_javascript (ComponentizeJS) and run_python (componentize-py), as
//! they ship (plugins/*/run_*/run_*.toml, `[grants] tools = "*"`), over the built-in file
//! tools: a model's program calls the registry's tools and returns a value; and hostile
//! programs, each ending in an error the model can act on, with the host still serving
//! and every limit held: an endless loop, memory bombs, 10,000 nested calls, tools not
//! granted, a code tool called from a code tool, a polluted global scope, a flood of
//! output, the environment, the network, megabyte results, deeply nested arguments and a
//! promise that never settles.

use std::time::Duration;

use toolhost::registry::{Arguments, ToolDefinition};
use toolhost::tools::{register_vfs_tools, VfsToolOptions};
use toolhost::vfs::{OsStorage, Storage};
use toolhost_plugin::manifest::ToolNames;

use super::*;

/// The registry: the file tools over a temporary root, a native `big` (1 MiB of text),
/// greet (a Rust example) and both
/// code tools with their shipped manifests (10 s per call). `tools`: what the operator
/// allows (`--plugin-tools`).
struct CodeTools {
    registry: Arc<Registry>,
    storage: Arc<dyn Storage>,
    _root: tempfile::TempDir,
    _plugins: tempfile::TempDir,
}

fn code_tools(built: &Built, tools: ToolNames) -> CodeTools {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent");
    let root = tempfile::tempdir().expect("root dir");
    let plugins = tempfile::tempdir().expect("plugins dir");
    toolhost_tests::install(plugins.path(), &["greet"]).expect("install greet");
    for (wasm, manifest) in [
        (
            &built.run_javascript,
            "plugins/javascript/run_javascript/run_javascript.toml",
        ),
        (
            &built.run_python,
            "plugins/python/run_python/run_python.toml",
        ),
    ] {
        let name = wasm.file_name().expect("a file name");
        std::fs::copy(wasm, plugins.path().join(name)).expect("copy component");
        let shipped = std::fs::read_to_string(repo.join(manifest)).expect("shipped manifest");
        assert!(shipped.contains("tools = \"*\"\n"), "{manifest}: {shipped}");
        assert!(
            shipped.contains("timeout_ms = 10000\n"),
            "{manifest}: {shipped}"
        );
        let toml = Path::new(manifest).file_name().expect("a file name");
        std::fs::write(plugins.path().join(toml), shipped).expect("manifest");
    }
    let storage: Arc<dyn Storage> = Arc::new(OsStorage::open(root.path()).expect("open root"));
    let registry = Arc::new(Registry::new());
    register_vfs_tools(&registry, VfsToolOptions::new(Arc::clone(&storage))).expect("built-ins");
    registry
        .register(
            ToolDefinition::new("big", "1 MiB of text.", json!({"type": "object"})),
            |_ctx: CallContext, _args: Arguments, _env: Environment| async move {
                Ok(ToolResult::new("x".repeat(1 << 20)))
            },
        )
        .expect("big");
    let host = PluginHost::new(
        PluginHostConfig::builder()
            .cache_dir(Some(cache_dir()))
            .definition_limits(loaded_machine_limits())
            .plugin_tools(Some(tools))
            .build(),
    )
    .expect("plugin host");
    let started = Instant::now();
    let report = host.load_dir(plugins.path(), &registry);
    eprintln!("loaded the code tools in {:.1?}", started.elapsed());
    assert!(report.failed.is_empty(), "{:?}", report.failed);
    CodeTools {
        registry,
        storage,
        _root: root,
        _plugins: plugins,
    }
}

impl CodeTools {
    /// Runs `code` with code tool `tool`: `{"result", "output"}`, or the error.
    async fn run(&self, tool: &str, code: &str) -> Result<Value, ToolError> {
        call(&self.registry, tool, json!({ "code": code })).await
    }

    /// Runs `code`, which must succeed: `(result, output)`.
    async fn ok(&self, tool: &str, code: &str) -> (Value, String) {
        let answer = self
            .run(tool, code)
            .await
            .unwrap_or_else(|err| panic!("{tool} failed: {err}\n{code}"));
        let output = answer["output"].as_str().expect("output").to_owned();
        (answer["result"].clone(), output)
    }

    /// Runs `code`, which must fail with a message: the message.
    async fn fails(&self, tool: &str, code: &str) -> String {
        match self.run(tool, code).await {
            Err(ToolError::Failed { message, .. }) => message,
            other => panic!("{tool}: not a failed call: {other:?}\n{code}"),
        }
    }

    fn write(&self, path: &str, text: &str) {
        self.storage
            .write(path, text.as_bytes(), "text/plain")
            .expect("seed file");
    }

    /// greet still answers, and both code tools still run a program.
    async fn assert_alive(&self) {
        assert_eq!(
            call(&self.registry, "greet", json!({"name": "Ada"})).await,
            Ok(json!("Hello, Ada!"))
        );
        assert_eq!(self.ok(JS, "return 1 + 1").await, (json!(2), String::new()));
        assert_eq!(
            self.ok(PY, "result = 1 + 1").await,
            (json!(2), String::new())
        );
    }
}

const JS: &str = "run_javascript";
const PY: &str = "run_python";

#[tokio::test(flavor = "multi_thread")]
async fn code_tools_call_the_registrys_tools_and_return_a_value() {
    let Some(built) = built_all() else {
        return;
    };
    let tools = code_tools(&built, ToolNames::All);
    // What the model reads: how to call tools and return a value (the tool list is not
    // known at load: the program asks with tools.list()).
    let definitions = tools.registry.definitions();
    for (name, returns) in [
        (JS, "`return` a JSON value"),
        (PY, "Set the top-level variable `result`"),
    ] {
        let definition = definitions
            .iter()
            .find(|d| d.name == name)
            .expect("offered");
        assert!(
            definition.description.contains(returns),
            "{}",
            definition.description
        );
        assert!(
            definition.description.contains("tools.list()"),
            "{}",
            definition.description
        );
        assert_eq!(definition.parameters["required"], json!(["code"]));
    }
    tools.write("a.md", "one needle\ntwo\n");
    tools.write("b.md", "needle needle\n");
    tools.write("c.md", "nothing\n");
    let (result, output) = tools
        .ok(
            JS,
            r#"
const hits = await tools.grep({pattern: "needle", output_mode: "files_with_matches"});
console.log("files", hits.files.length, {first: hits.files[0]});
let lines = 0;
for (const path of hits.files) {
  const file = await tools.read_file({path});
  lines += file.content.split("\n").filter((l) => l.includes("needle")).length;
}
return {files: hits.files, lines};
"#,
        )
        .await;
    assert_eq!(result, json!({"files": ["a.md", "b.md"], "lines": 2}));
    assert_eq!(output, "files 2 {\"first\":\"a.md\"}\n");
    let (result, output) = tools
        .ok(
            PY,
            r#"
hits = tools.grep(pattern="needle", output_mode="files_with_matches")
print("files", len(hits["files"]))
lines = 0
for path in hits["files"]:
    content = tools.read_file(path=path)["content"]
    lines += sum(1 for line in content.split("\n") if "needle" in line)
result = {"files": hits["files"], "lines": lines}
"#,
        )
        .await;
    assert_eq!(result, json!({"files": ["a.md", "b.md"], "lines": 2}));
    assert_eq!(output, "files 2\n");
    // tools.list(): the granted tools, the code tools themselves never among them.
    let (listed, _) = tools
        .ok(JS, "return (await tools.list()).map((t) => t.name)")
        .await;
    let (listed_py, _) = tools
        .ok(PY, "result = [t['name'] for t in tools.list()]")
        .await;
    assert_eq!(listed, listed_py);
    let names: Vec<&str> = listed
        .as_array()
        .expect("list")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        names.contains(&"grep") && names.contains(&"greet"),
        "{names:?}"
    );
    assert!(!names.contains(&JS) && !names.contains(&PY), "{names:?}");
    // JavaScript's own lookups on `tools` (await, JSON) are not tool calls.
    assert_eq!(
        tools
            .ok(
                JS,
                "console.log(tools); return [JSON.stringify(tools), (await tools) === tools]"
            )
            .await,
        (json!(["{}", true]), "{}\n".to_owned())
    );
    // A tool's error is the model's text, thrown / raised where the program can catch it.
    let (caught, _) = tools
        .ok(JS, r#"try { await tools.read_file({path: "missing.md"}); } catch (e) { return e.message; }"#)
        .await;
    let direct = call(&tools.registry, "read_file", json!({"path": "missing.md"}))
        .await
        .expect_err("no such file")
        .to_string();
    assert_eq!(caught, json!(direct));
    let (caught, _) = tools
        .ok(PY, "try:\n    tools.read_file(path='missing.md')\nexcept ToolError as e:\n    result = str(e)")
        .await;
    assert_eq!(caught, json!(direct));
    // Errors name where: a syntax error its line and column, an exception its line.
    assert_eq!(
        tools.run(JS, "const a = 1;\nlet x = ;").await,
        invalid(JS, "SyntaxError at line 2, column 9: expected expression, got ';'; fix the code and run it again")
    );
    assert_eq!(
        tools.run(PY, "a = 1\nx = (\n").await,
        invalid(
            PY,
            "SyntaxError at line 2, column 5: '(' was never closed; fix the code and run it again"
        )
    );
    assert_eq!(
        tools.fails(JS, "console.log('before');\nawait 1;\nnull.foo;").await,
        "the program threw TypeError at line 3, column 1: can't access property \"foo\" of null\nconsole output before it:\nbefore\n"
    );
    assert_eq!(
        tools.fails(PY, "print('before')\nx = None\nx.foo").await,
        "the program raised AttributeError at line 3: 'NoneType' object has no attribute 'foo'\nprinted output before it:\nbefore\n"
    );
    tools.assert_alive().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn hostile_programs_end_in_an_error_for_the_model_and_the_host_keeps_serving() {
    let Some(built) = built_all() else {
        return;
    };
    let tools = code_tools(&built, ToolNames::All);

    // An endless loop: stopped at the time limit (the manifest's, 10 s).
    for (tool, code) in [(JS, "while (true) {}"), (PY, "while True:\n    pass")] {
        let started = Instant::now();
        let stopped = tools.run(tool, code).await;
        assert_eq!(
            stopped.as_ref().map_err(ToString::to_string),
            Err(format!("{tool}: timed out after 10s (the per-call time limit) and was stopped; ask for less work per call or try another approach"))
        );
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{:?}",
            started.elapsed()
        );
    }
    tools.assert_alive().await;

    // Memory bombs: the engines refuse them, or the host's memory limit stops them.
    assert_eq!(
        tools.fails(JS, "const s = \"x\".repeat(2**30); return s.length").await,
        "the program threw RangeError at line 1, column 15: repeat count must be less than infinity and not overflow maximum string size"
    );
    assert_eq!(
        tools.fails(PY, "b = bytearray(2**31)").await,
        "the program raised OverflowError at line 1: cannot fit 'int' into an index-sized integer"
    );
    assert_eq!(
        tools.fails(PY, "b = bytearray(2**29)").await,
        "the program raised MemoryError at line 1: out of memory (the sandbox's memory limit); work on less data at once"
    );
    match tools
        .run(
            JS,
            "const a = []; for (;;) a.push(\"y\".repeat(1 << 20) + a.length);",
        )
        .await
    {
        Err(err @ ToolError::LimitExceeded { .. }) => {
            assert!(
                err.to_string()
                    .starts_with("run_javascript: stopped at the memory (64 MiB) limit"),
                "{err}"
            );
        }
        other => panic!("not stopped at the memory limit: {other:?}"),
    }
    tools.assert_alive().await;

    // 10,000 nested calls: the 65th is refused (max_tool_calls, 64), the loop ends.
    let limit = "greet: this call already made 64 tool calls, the most plugin run_javascript's grant allows per call (`[grants] max_tool_calls` = 64); make fewer calls";
    let (result, _) = tools
        .ok(
            JS,
            r#"let ok = 0;
for (let i = 0; i < 10000; i++) {
  try { await tools.greet({name: "x"}); ok++; } catch (e) { return {ok, at: i, error: e.message}; }
}
return {ok};"#,
        )
        .await;
    assert_eq!(result, json!({"ok": 64, "at": 64, "error": limit}));
    let (result, _) = tools
        .ok(
            PY,
            "ok = 0\nfor i in range(10000):\n    try:\n        tools.greet(name='x')\n        ok += 1\n    except ToolError as e:\n        result = {'ok': ok, 'at': i, 'error': str(e)}\n        break",
        )
        .await;
    assert_eq!(
        result,
        json!({"ok": 64, "at": 64, "error": limit.replace("run_javascript", "run_python")})
    );

    // A code tool from inside a code tool: refused (no recursion).
    let (result, _) = tools
        .ok(
            JS,
            "try { await tools.run_python({code: 'result = 1'}); } catch (e) { return e.message; }",
        )
        .await;
    assert_eq!(result, json!("run_python: tool run_python composes other tools itself, so it cannot be called from a composing tool (no recursion); call it directly"));
    let (result, _) = tools
        .ok(PY, "try:\n    tools.run_javascript(code='return 1')\nexcept ToolError as e:\n    result = str(e)")
        .await;
    assert_eq!(result, json!("run_javascript: tool run_javascript composes other tools itself, so it cannot be called from a composing tool (no recursion); call it directly"));

    // The global scope replaced or polluted: the next call runs on a fresh instance.
    let (_, _) = tools
        .ok(JS, "globalThis.tools = null; Object.prototype.polluted = 1; Array.prototype.map = () => 'hijacked'; JSON.stringify = () => '\"hijacked\"'; return 0")
        .await;
    assert_eq!(
        tools
            .ok(
                JS,
                "return [({}).polluted === undefined, [1, 2].map((x) => x * 2), typeof tools.grep]"
            )
            .await,
        (json!([true, [2, 4], "function"]), String::new())
    );
    let (_, _) = tools.ok(PY, "import json, builtins\njson.dumps = lambda *a, **k: 'hijacked'\nbuiltins.len = None\nresult = 0").await;
    assert_eq!(
        tools
            .ok(PY, "result = [len('abc'), __import__('json').dumps([1])]")
            .await,
        (json!([3, "[1]"]), String::new())
    );

    // A flood of output: capped at 16 KiB, the rest counted; the call's result fits.
    let (result, output) = tools
        .ok(
            JS,
            "for (let i = 0; i < 100000; i++) console.log('line', i); return 1",
        )
        .await;
    assert_eq!(result, json!(1));
    assert!(output.starts_with("line 0\nline 1\n"), "{}", &output[..40]);
    assert!(output.len() < 16 * 1024 + 200, "{}", output.len());
    assert!(
        output.ends_with(" more characters were not kept (limit 16 KiB)]"),
        "{}",
        &output[output.len() - 100..]
    );
    let (result, output) = tools
        .ok(
            PY,
            "for i in range(100000):\n    print('line', i)\nresult = 1",
        )
        .await;
    assert_eq!(result, json!(1));
    assert!(output.len() < 16 * 1024 + 200, "{}", output.len());
    assert!(
        output.ends_with(" more characters were not kept (limit 16 KiB)]"),
        "{}",
        &output[output.len() - 100..]
    );
    // Escapes count: control characters take 6 bytes each in the JSON answer.
    let (_, output) = tools
        .ok(JS, "console.log('\\u0001'.repeat(100000)); return 1")
        .await;
    assert!(serde_json::to_string(&output).expect("json").len() < 16 * 1024 + 200);
    // A returned value over 32 KiB: an error asking for less, not a cut value.
    assert_eq!(
        tools.fails(JS, "return 'x'.repeat(40000)").await,
        "the returned value is 40002 bytes of JSON, over the limit of 32 KiB; return less (a count, a summary, the first items)"
    );
    assert_eq!(
        tools.fails(PY, "result = 'x' * 40000").await,
        "`result` is 40002 bytes of JSON, over the limit of 32 KiB; return less (a count, a summary, the first items)"
    );

    // The environment: empty (no [config] in the manifests); no process object in JS.
    assert_eq!(
        tools.ok(JS, "return typeof process").await.0,
        json!("undefined")
    );
    assert_eq!(
        tools.ok(PY, "import os\nresult = dict(os.environ)").await.0,
        json!({})
    );

    // The network, without an HTTP grant: refused.
    assert_eq!(
        tools.ok(JS, "try { await fetch('http://127.0.0.1:9/'); return 'sent'; } catch (e) { return String(e); }").await.0,
        json!("TypeError: NetworkError when attempting to fetch resource")
    );
    assert_eq!(
        tools
            .fails(
                PY,
                "import urllib.request\nurllib.request.urlopen('http://127.0.0.1:9/')"
            )
            .await,
        "the program raised ModuleNotFoundError at line 1: No module named 'urllib'"
    );
    tools.assert_alive().await;

    // A megabyte per nested call, in a loop: each is refused at the registry's result
    // cap (64 KiB), the program goes on, and its answer is within the caps.
    let too_large = call(&tools.registry, "big", json!({}))
        .await
        .expect_err("over the result cap");
    assert!(
        matches!(too_large, ToolError::ResultTooLarge { .. }),
        "{too_large:?}"
    );
    let too_large = too_large.to_string();
    let (result, _) = tools
        .ok(JS, "const seen = new Set(); for (let i = 0; i < 30; i++) { try { await tools.big(); seen.add('ok'); } catch (e) { seen.add(e.message); } } return [...seen];")
        .await;
    assert_eq!(result, json!([too_large]));
    let (result, _) = tools
        .ok(PY, "seen = set()\nfor i in range(30):\n    try:\n        tools.big()\n        seen.add('ok')\n    except ToolError as e:\n        seen.add(str(e))\nresult = sorted(seen)")
        .await;
    assert_eq!(result, json!([too_large]));

    // Deeply nested arguments to a nested call: the registry's argument checks apply.
    for (tool, code) in [
        (JS, "let a = {}; for (let i = 0; i < 300; i++) a = {a}; try { await tools.greet({name: 'x', deep: a}); return 'ran'; } catch (e) { return e.message; }"),
        (PY, "a = {}\nfor i in range(300):\n    a = {'a': a}\ntry:\n    tools.greet(name='x', deep=a)\n    result = 'ran'\nexcept ToolError as e:\n    result = str(e)"),
    ] {
        let (result, _) = tools.ok(tool, code).await;
        let message = result.as_str().expect("a message");
        assert!(message.starts_with("greet: "), "{message}");
        assert!(message.contains("recursion limit exceeded"), "{message}");
    }

    // A promise that never settles: reported at once, not waited on until the limit.
    let started = Instant::now();
    assert_eq!(
        tools.fails(JS, "console.log('waiting');\nawait new Promise(() => {});\nreturn 1;").await,
        "the program never finished: its promise is still pending and nothing is left to run (an `await` of a promise that never resolves?); await only promises that settle\nconsole output before it:\nwaiting\n"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    // A timer that does fire is waited for.
    assert_eq!(
        tools
            .ok(
                JS,
                "return await new Promise((resolve) => setTimeout(() => resolve(7), 50));"
            )
            .await
            .0,
        json!(7)
    );
    tools.assert_alive().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn code_tools_call_only_the_tools_the_operator_allows() {
    let Some(built) = built_all() else {
        return;
    };
    let tools = code_tools(&built, ToolNames::only(["grep", "read_file"]));
    let (listed, _) = tools
        .ok(JS, "return (await tools.list()).map((t) => t.name)")
        .await;
    assert_eq!(listed, json!(["read_file", "grep"]));
    let refused = "write_file: tool write_file is not granted to plugin run_javascript: its manifest must name it in `[grants] tools` and the operator must allow it (`--plugin-tools write_file`); it may call: grep, read_file";
    let (result, _) = tools
        .ok(JS, "try { await tools.write_file({path: 'x.md', content: 'x'}); return 'written'; } catch (e) { return e.message; }")
        .await;
    assert_eq!(result, json!(refused));
    let (result, _) = tools
        .ok(PY, "try:\n    tools.write_file(path='x.md', content='x')\n    result = 'written'\nexcept ToolError as e:\n    result = str(e)")
        .await;
    assert_eq!(
        result,
        json!(refused.replace("run_javascript", "run_python"))
    );
    assert!(tools.storage.read("x.md").is_err(), "nothing was written");
}
