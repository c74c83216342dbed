//! End to end, the plugin author's journey: `host new` a project outside the repository,
//! depending on the SDK as `cargo package -p toolhost-sdk` packs it (what an outside crate
//! gets from crates.io or a copy), then `cargo test`, `./build`, and the host loads and
//! calls the component (`host tools`, `host call`, `host run`).

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use super::mcp::Server;
use crate::host;
use serde_json::{json, Value};

fn cargo() -> Command {
    let mut command = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    // The outer `cargo test`'s settings are not the project's.
    for var in [
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "CARGO_BUILD_TARGET",
        "CARGO_TARGET_DIR",
        "CARGO_MAKEFLAGS",
        "MAKEFLAGS",
    ] {
        command.env_remove(var);
    }
    command
}

#[track_caller]
fn succeed(command: &mut Command) -> Output {
    let output = command.stdin(Stdio::null()).output().expect("run");
    assert!(
        output.status.success(),
        "{command:?} failed ({:?}):\n{}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// `cargo package -p toolhost-sdk`, unpacked: the SDK as an outside crate sees it (no
/// `../wit`, no workspace).
fn packaged_sdk(work: &Path) -> PathBuf {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let target = work.join("package");
    succeed(
        cargo()
            .current_dir(&repo)
            .args([
                "package",
                "-p",
                "toolhost-sdk",
                "--allow-dirty",
                "--no-verify",
                "--quiet",
            ])
            .arg("--target-dir")
            .arg(&target),
    );
    let version = env!("CARGO_PKG_VERSION");
    let unpacked = work.join("sdk");
    let _ = std::fs::remove_dir_all(&unpacked);
    std::fs::create_dir_all(&unpacked).unwrap();
    succeed(
        Command::new("tar")
            .arg("xzf")
            .arg(target.join(format!("package/toolhost-sdk-{version}.crate")))
            .arg("-C")
            .arg(&unpacked),
    );
    let sdk = unpacked.join(format!("toolhost-sdk-{version}"));
    assert!(
        sdk.join("wit/plugin.wit").is_file(),
        "the package carries its WIT"
    );
    assert!(!sdk.join("tests/wit_in_sync.rs").exists());
    sdk
}

/// docs/guide.md's journey 2 shows the commands the tests here run.
#[test]
fn the_guide_shows_the_commands_run_here() {
    let guide =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/guide.md"))
            .expect("docs/guide.md");
    for line in [
        "host new word_count",
        "cd word_count",
        "cargo test",
        "./build",
        "host inspect dist/word_count.wasm",
        r#"host call --plugins dist word_count '{"text":"hello plugin world"}'"#,
        // The same in Python (and JavaScript), run by the two tests below.
        "host new word_count --lang python",
        "python3 -m unittest",
        "`--lang js`, the tests are `node --test`):",
    ] {
        assert!(
            guide.lines().any(|l| l == line),
            "docs/guide.md lacks `{line}`"
        );
    }
}

#[test]
fn a_new_plugin_builds_with_one_command_and_the_host_loads_and_calls_it() {
    // Builds are kept between runs here; the project itself is made afresh.
    let work = Path::new(env!("CARGO_TARGET_TMPDIR")).join("host-new");
    std::fs::create_dir_all(&work).unwrap();
    let sdk = packaged_sdk(&work);
    let projects = tempfile::tempdir().unwrap();
    let target_dir = work.join("target");

    let output = succeed(
        host()
            .args(["new", "word_count"])
            .arg("--sdk")
            .arg(&sdk)
            .current_dir(projects.path()),
    );
    let project = projects.path().join("word_count");
    let said = String::from_utf8_lossy(&output.stdout);
    assert!(
        said.starts_with(&format!(
            "created {}: a Rust plugin with two tools, `word_count` (a text and an image) and `word_count_confirmed` (asks the user first)\n",
            Path::new(".").join("word_count").display()
        )),
        "{said}"
    );
    // The project's README says how to ship it, with its own name filled in.
    let readme = std::fs::read_to_string(project.join("README.md")).unwrap();
    assert!(
        readme.contains("host push dist/word_count.wasm oci://REGISTRY/word_count:1"),
        "{readme}"
    );
    let manifest = std::fs::read_to_string(project.join("Cargo.toml")).unwrap();
    assert!(
        manifest.contains(&format!(
            "toolhost-sdk = {{ path = \"{}\" }}",
            std::fs::canonicalize(&sdk).unwrap().display()
        )),
        "{manifest}"
    );

    // The project's own test, natively.
    succeed(
        cargo()
            .args(["test", "--quiet"])
            .env("CARGO_TARGET_DIR", &target_dir)
            .current_dir(&project),
    );
    // One command builds it into dist/.
    succeed(
        Command::new(project.join("build"))
            .env_remove("RUSTFLAGS")
            .env_remove("CARGO_ENCODED_RUSTFLAGS")
            .env_remove("CARGO_BUILD_TARGET")
            .env("CARGO_TARGET_DIR", &target_dir)
            .current_dir(&project),
    );
    let dist = project.join("dist");
    let wasm = std::fs::metadata(dist.join("word_count.wasm"))
        .unwrap()
        .len();
    assert!(dist.join("word_count.toml").is_file());
    // The scaffold's release profile keeps it small (cargo's default profile: ~2x).
    assert!(wasm < 250_000, "word_count.wasm is {wasm} bytes");

    // host inspect: the tools, the manifest's limits, no file access, asking the user.
    let output = succeed(
        host()
            .args(["inspect", "dist/word_count.wasm", "--cache-dir"])
            .arg(work.join("inspect-cache"))
            .current_dir(&project),
    );
    let report = String::from_utf8_lossy(&output.stdout);
    for line in [
        "  file access: none\n",
        "  ask the user: yes (the host must allow it: --plugin-ask; else every question is refused)\n",
        "  limits: 5s per call, 32 MiB memory, no fuel limit, 1 MiB output\n",
        "  tools (2):\n    word_count            Count the words and characters of a text. Returns {\"words\", \"characters\"} and a picture of the word count.\n",
        "    word_count_confirmed  Ask the user to confirm, then count the words of a text.\n",
        "    toolhost:plugin/interaction@0.3.0\n",
    ] {
        assert!(report.contains(line), "{line:?} not in:\n{report}");
    }

    let cache = tempfile::tempdir().unwrap();
    let plugin_flags = |command: &mut Command| {
        command
            .arg("--no-builtins")
            .arg("--plugins")
            .arg(&dist)
            .arg("--cache-dir")
            .arg(cache.path());
    };
    let mut tools = host();
    tools.arg("tools");
    plugin_flags(&mut tools);
    let output = succeed(&mut tools);
    assert_eq!(String::from_utf8_lossy(&output.stdout), TOOLS_LISTED);

    // As the guide and the project's README write it, from the project folder.
    let output = succeed(
        host()
            .args([
                "call",
                "--plugins",
                "dist",
                "word_count",
                r#"{"text":"hello plugin world"}"#,
            ])
            .env("XDG_CACHE_HOME", work.join("xdg-cache"))
            .current_dir(&project),
    );
    let result: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(result, json!({"words": 3, "characters": 18}));

    // An argument of the wrong type: answered for the tool, naming the argument.
    let mut wrong = host();
    wrong.arg("call");
    plugin_flags(&mut wrong);
    wrong.args(["word_count", r#"{"text":3}"#]);
    let output = wrong.stdin(Stdio::null()).output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.starts_with(
            "error [invalid_arguments]: word_count: argument \"text\" must be a string"
        ),
        "{stderr}"
    );

    // Served over MCP by `host run`: the image, and the confirmation asked.
    let mut run = host();
    run.args(["run", "--plugin-ask"]);
    plugin_flags(&mut run);
    mcp_image_and_confirm(&mut run);
}

/// What `host tools` lists for a new project.
const TOOLS_LISTED: &str = "word_count            Count the words and characters of a text.\nword_count_confirmed  Ask the user to confirm, then count the words of a text.\n";

/// One black bar, two pixels wide and eight tall: the picture of two words, as a PNG
/// (8-bit grayscale, stored deflate), base64 as MCP carries it. Every language's template
/// writes exactly these bytes.
const TWO_WORDS_PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAIAAAAICAAAAAD2RnGeAAAAI0lEQVR4AQEYAOf/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAABgAAV0xBKkAAAAASUVORK5CYII=";

/// Over MCP (`command` is `host run --plugin-ask` with the project's plugin): the sample
/// tool's result is the JSON text and the PNG image; the confirming tool asks a client
/// that declared elicitation (accepted: counted; declined: not), and fails, saying why,
/// for a client that did not (the refusal the plugin sees as an error), never counting.
fn mcp_image_and_confirm(command: &mut Command) {
    let initialize = |server: &mut Server, capabilities: Value| {
        let response = server.request(
            1,
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": capabilities,
                "clientInfo": {"name": "cli_new", "version": "1"}}),
        );
        assert_eq!(response["result"]["protocolVersion"], "2025-11-25");
        server.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    };
    let call = |id: i64, name: &str| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": name, "arguments": {"text": "one two"}}})
    };
    let counted = json!({
        "content": [
            {"type": "text", "text": r#"{"characters":7,"words":2}"#},
            {"type": "image", "data": TWO_WORDS_PNG, "mimeType": "image/png"},
        ],
        "isError": false,
    });

    let mut server = Server::spawn(command);
    initialize(&mut server, json!({"elicitation": {}}));
    let response = server.request(
        2,
        "tools/call",
        json!({"name": "word_count", "arguments": {"text": "one two"}}),
    );
    assert_eq!(response["result"], counted);
    for (id, action) in [(3, "accept"), (4, "decline")] {
        server.send(call(id, "word_count_confirmed"));
        let question = server.receive();
        assert_eq!(question["method"], "elicitation/create", "{question}");
        assert_eq!(
            question["params"]["message"],
            "Count the words of a text of 7 characters?"
        );
        server.send(json!({"jsonrpc": "2.0", "id": question["id"], "result": {"action": action}}));
        let answer = server.receive();
        assert_eq!(answer["id"], id);
        if action == "accept" {
            assert_eq!(answer["result"], counted);
        } else {
            assert_eq!(
                answer["result"],
                json!({"content": [{"type": "text", "text": "the user declined; nothing was counted"}], "isError": false})
            );
        }
    }
    let (code, stderr, _) = server.finish();
    assert_eq!(code, Some(0), "{stderr}");

    // A client without elicitation: the question is refused, the tool fails saying so.
    let mut server = Server::spawn(command);
    initialize(&mut server, json!({}));
    let (text, is_error) = server.call(2, "word_count_confirmed", json!({"text": "one two"}));
    assert!(is_error, "{text}");
    assert!(
        text.contains("could not ask the user: nobody can be asked during this call (the client cannot ask its user"),
        "{text}"
    );
    let (code, stderr, _) = server.finish();
    assert_eq!(code, Some(0), "{stderr}");
}

/// `host new` with a command line it cannot follow: exit 2, a message saying what to do,
/// nothing created.
#[test]
fn a_bad_language_or_flag_is_a_bad_command_line() {
    let dir = tempfile::tempdir().unwrap();
    for (args, message) in [
        (
            &["new", "x", "--lang", "ruby"][..],
            "error: invalid value 'ruby' for '--lang <LANG>'\n  [possible values: rust, python, js]\n\nFor more information, try '--help'.\n",
        ),
        (
            &["new", "x", "--lang", "python", "--sdk", "."],
            "error: --sdk is for --lang rust; a Python project does not use the Rust SDK (leave --sdk out)\n",
        ),
        (
            &["new", "x", "--lang", "js", "--sdk", "."],
            "error: --sdk is for --lang rust; a JavaScript project does not use the Rust SDK (leave --sdk out)\n",
        ),
        (
            &["new", "my-tool", "--lang", "python"],
            "error: invalid value 'my-tool' for '<PLUGIN_NAME>': \"my-tool\" is not a plugin name: use lower-case letters, digits and _, starting with a letter (e.g. my_tool); it names the project, the tool and NAME.wasm\n\nFor more information, try '--help'.\n",
        ),
    ] {
        let output = host()
            .args(args)
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        assert_eq!(String::from_utf8_lossy(&output.stderr), message, "{args:?}");
        assert_eq!(output.stdout, b"", "{args:?}");
    }
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

/// An existing folder is refused in every language, and what is in it is kept.
#[test]
fn an_existing_folder_is_never_overwritten_in_any_language() {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("tool");
    std::fs::create_dir(&project).unwrap();
    std::fs::write(project.join("tool.py"), "# mine").unwrap();
    for lang in ["rust", "python", "js"] {
        let output = host()
            .args(["new", "tool", "--lang", lang])
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(3), "{lang}");
        assert_eq!(
            String::from_utf8_lossy(&output.stderr),
            format!(
                "error: {} already exists; nothing was written. Choose another name, or another folder with --dir\n",
                Path::new(".").join("tool").display()
            ),
            "{lang}"
        );
    }
    let files: Vec<_> = std::fs::read_dir(&project)
        .unwrap()
        .map(|entry| entry.unwrap().file_name())
        .collect();
    assert_eq!(files, ["tool.py"]);
    assert_eq!(
        std::fs::read_to_string(project.join("tool.py")).unwrap(),
        "# mine"
    );
}

/// A Python or JavaScript project's modules have fixed names, so a plugin named like one
/// of them, a standard module or a keyword still gets a project whose own tests pass
/// natively (`python3 -m unittest`, `node --test`), and its tool carries that name.
#[test]
fn python_and_js_projects_test_natively_whatever_their_name() {
    let dir = tempfile::tempdir().unwrap();
    for (lang, names, test) in [
        (
            "python",
            &["tool", "app", "test_tool", "json", "unittest", "class"][..],
            &["python3", "-m", "unittest", "--quiet"][..],
        ),
        (
            "js",
            &["tool", "plugin", "package", "class", "node_modules"],
            &["node", "--test"],
        ),
    ] {
        for name in names {
            let parent = dir.path().join(lang);
            succeed(
                host()
                    .args(["new", name, "--lang", lang, "--dir"])
                    .arg(&parent),
            );
            let project = parent.join(name);
            assert!(project.join(format!("{name}.toml")).is_file());
            let output = succeed(
                Command::new(test[0])
                    .args(&test[1..])
                    .env_remove("NODE_OPTIONS")
                    .env_remove("PYTHONPATH")
                    .current_dir(&project),
            );
            let said = format!(
                "{}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
            // Every test of the template ran (none was silently skipped).
            let ran = if lang == "python" {
                "Ran 4 tests"
            } else {
                "# pass 4"
            };
            assert!(said.contains(ran), "{lang} {name}: {said}");
            let logic = if lang == "python" {
                "tool.py"
            } else {
                "tool.js"
            };
            let logic = std::fs::read_to_string(project.join(logic)).unwrap();
            assert!(
                logic.contains(&format!("NAME = \"{name}\""))
                    || logic.contains(&format!("NAME = '{name}'")),
                "{lang} {name}: {logic}"
            );
        }
    }
}

/// Whether componentize-py (`python`) or ComponentizeJS (`javascript`) is installed, asked
/// the way `scripts/build-pyjs-plugins` (and tests/all/pyjs.rs) do: `scripts/test` installs
/// them and sets `TOOLHOST_REQUIRE_PYJS=1`, so there a missing one fails the test; a plain
/// `cargo test` without them skips it and says so.
#[allow(
    clippy::print_stderr,
    reason = "a skipped test says so on stderr, where cargo test shows it"
)]
fn toolchain_installed(language: &str) -> bool {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/pyjs-toolchain");
    let output = Command::new("bash")
        .arg(script)
        .arg(language)
        .stdin(Stdio::null())
        .output()
        .expect("run bash scripts/pyjs-toolchain");
    match output.status.code() {
        Some(0) => true,
        Some(3 | 4) if std::env::var_os("TOOLHOST_REQUIRE_PYJS").is_none() => {
            eprintln!(
                "SKIPPED: the {language} toolchain is missing (run `bash scripts/build-pyjs-plugins --install-only`, or scripts/test, which does)"
            );
            false
        }
        other => panic!(
            "scripts/pyjs-toolchain {language} failed ({other:?}):\n{}",
            String::from_utf8_lossy(&output.stderr)
        ),
    }
}

/// The journey of a Python or JavaScript plugin: `host new --lang LANG`, its native tests,
/// `./build`, then `host inspect`, `host tools` and `host call` as its README writes them.
#[allow(
    clippy::print_stderr,
    reason = "the build's time is reported on stderr, where cargo test shows it"
)]
fn scaffold_build_and_call(lang: &str, toolchain: &str, language: &str) {
    if !toolchain_installed(toolchain) {
        return;
    }
    let projects = tempfile::tempdir().unwrap();
    let output = succeed(
        host()
            .args(["new", "word_count", "--lang", lang])
            .current_dir(projects.path()),
    );
    let said = String::from_utf8_lossy(&output.stdout);
    assert!(
        said.starts_with(&format!(
            "created {}: a {language} plugin with two tools, `word_count` (a text and an image) and `word_count_confirmed` (asks the user first)\n",
            Path::new(".").join("word_count").display()
        )),
        "{said}"
    );
    let project = projects.path().join("word_count");
    // The WIT is the host's own (0.3.0), and the README has the name filled in.
    assert_eq!(
        std::fs::read_to_string(project.join("wit/plugin.wit")).unwrap(),
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../wit/plugin.wit"))
            .unwrap()
    );
    let readme = std::fs::read_to_string(project.join("README.md")).unwrap();
    for line in [
        "host inspect dist/word_count.wasm",
        r#"host call  --plugins dist word_count '{"text":"hello plugin world"}'"#,
        "host push dist/word_count.wasm oci://REGISTRY/word_count:1",
    ] {
        assert!(readme.contains(line), "{line:?} not in:\n{readme}");
    }

    // One command builds it into dist/.
    let started = std::time::Instant::now();
    let output = succeed(Command::new(project.join("build")).current_dir(&project));
    eprintln!("{language} ./build took {:.1?}", started.elapsed());
    let size = std::fs::metadata(project.join("dist/word_count.wasm"))
        .unwrap()
        .len();
    assert_eq!(
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .last()
            .unwrap(),
        format!("built dist/word_count.wasm ({size} bytes) and dist/word_count.toml")
    );
    assert!(project.join("dist/word_count.toml").is_file());
    assert!(!project.join("dist/.word_count.wasm.partial").exists());

    // From the project folder, as the README writes the commands; the compile cache is
    // this test's own (XDG_CACHE_HOME).
    let xdg = tempfile::tempdir().unwrap();
    let in_project = |args: &[&str]| {
        let mut command = host();
        command
            .args(args)
            .env("XDG_CACHE_HOME", xdg.path())
            .current_dir(&project);
        command
    };
    let started = std::time::Instant::now();
    let output = succeed(&mut in_project(&["inspect", "dist/word_count.wasm"]));
    eprintln!(
        "{language} host inspect (compiling the component) took {:.1?}",
        started.elapsed()
    );
    let report = String::from_utf8_lossy(&output.stdout);
    for line in [
        "word_count (dist/word_count.wasm)\n",
        "  manifest: dist/word_count.toml\n",
        "  file access: none\n",
        "  http: none\n",
        "  ask the user: yes (the host must allow it: --plugin-ask; else every question is refused)\n",
        "  limits: 5s per call, 32 MiB memory, no fuel limit, 1 MiB output\n",
        "  tools (2):\n    word_count            Count the words and characters of a text. Returns {\"words\", \"characters\"} and a picture of the word count.\n                          (read-only: true)\n    word_count_confirmed  Ask the user to confirm, then count the words of a text.\n                          (read-only: true)\n",
        "    toolhost:plugin/tools@0.3.0\n",
        "    toolhost:plugin/interaction@0.3.0\n",
    ] {
        assert!(report.contains(line), "{line:?} not in:\n{report}");
    }
    // No web access asked for: the JavaScript build leaves ComponentizeJS's fetch out.
    assert!(!report.contains("wasi:http/outgoing-handler"), "{report}");

    let output = succeed(&mut in_project(&[
        "tools",
        "--no-builtins",
        "--plugins",
        "dist",
    ]));
    assert_eq!(String::from_utf8_lossy(&output.stdout), TOOLS_LISTED);
    let output = succeed(&mut in_project(&[
        "call",
        "--plugins",
        "dist",
        "word_count",
        r#"{"text":"hello plugin world"}"#,
    ]));
    let result: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(result, json!({"words": 3, "characters": 18}));

    // Wrong arguments, as an argument error for the model: the host checks them against
    // the tool's schema first (in the same words as the tool's own check), and the tool
    // checks what a schema cannot say (an empty text).
    for (arguments, message) in [
        (
            r#"{"text":3}"#,
            r#"argument "text" must be a string, got number 3"#,
        ),
        ("{}", r#"argument "text" is required"#),
        (
            r#"{"text":" "}"#,
            "text is empty; pass the text whose words to count",
        ),
    ] {
        let output = in_project(&["call", "--plugins", "dist", "word_count", arguments])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(1), "{arguments}");
        assert_eq!(
            String::from_utf8_lossy(&output.stderr),
            format!("error [invalid_arguments]: word_count: {message}\n"),
            "{arguments}"
        );
    }

    // Over MCP: the image block, and the confirmation asked (or refused, for a client
    // that cannot ask).
    mcp_image_and_confirm(&mut in_project(&[
        "run",
        "--no-builtins",
        "--plugins",
        "dist",
        "--plugin-ask",
    ]));
}

#[test]
fn a_new_python_plugin_builds_with_one_command_and_the_host_loads_and_calls_it() {
    scaffold_build_and_call("python", "python", "Python");
}

#[test]
fn a_new_javascript_plugin_builds_with_one_command_and_the_host_loads_and_calls_it() {
    scaffold_build_and_call("js", "javascript", "JavaScript");
}
