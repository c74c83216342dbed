//! End to end: the messages a new user meets in the first hour say what
//! happened and what to do, once, and the README quotes them as the code prints them.

use std::process::{Output, Stdio};

use crate::text;

/// The exit code of a bad command line.
const EXIT_USAGE: i32 = 2;

fn host(args: &[&str]) -> Output {
    crate::host()
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run host")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn readme() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md"))
        .expect("README.md")
}

/// A temp dir holding the example plugins as scripts/build-plugins ships them.
fn examples() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    toolhost_tests::install(dir.path(), &["greet", "divide", "wordcount"]).unwrap();
    dir
}

/// `host tools` on the README's example printed an ERROR (wordcount asks for a read grant)
/// naming `PluginHostConfig::max_file_access`: the message names the flag only, and the
/// README's example passes the flag.
#[test]
fn a_denied_grant_names_the_flag_and_the_readme_example_passes_it() {
    let plugins = examples();
    let root = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let base = [
        "tools",
        "--plugins",
        text(plugins.path()),
        "--root",
        text(root.path()),
        "--cache-dir",
        text(cache.path()),
    ];
    let output = host(&base);
    let log = stderr(&output);
    assert_eq!(output.status.code(), Some(0), "{log}");
    let manifest = plugins.path().join("wordcount.toml");
    assert!(
        log.contains(&format!(
            "{}: the manifest asks for file access \"read\" but the host allows at most \"none\"; the plugin was not loaded. To allow it, start the host with `--plugin-files read`, or remove the grant from the manifest",
            manifest.display()
        )),
        "{log}"
    );
    assert!(!log.contains("PluginHostConfig"), "{log}");

    let mut granted = base.to_vec();
    granted.extend(["--plugin-files", "read"]);
    let output = host(&granted);
    let log = stderr(&output);
    assert_eq!(output.status.code(), Some(0), "{log}");
    assert!(!log.contains("ERROR"), "{log}");
    assert!(
        String::from_utf8_lossy(&output.stdout).contains("\nwordcount "),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );
    let readme = readme();
    for example in [
        "host tools --plugins plugins/dist --plugin-files read",
        "host call  --plugins plugins/dist --plugin-files read --root ./notes wordcount",
    ] {
        assert!(readme.contains(example), "README lacks `{example}`");
    }
}

/// `--timeout 1s` reported "timed out after 999ms" (a plugin measures the time it was
/// given from its own start): the configured limit is reported.
#[test]
fn a_time_out_reports_the_configured_limit() {
    let plugins = tempfile::tempdir().unwrap();
    toolhost_tests::install(plugins.path(), &["hostile_loop"]).unwrap();
    let cache = tempfile::tempdir().unwrap();
    let output = host(&[
        "call",
        "--no-builtins",
        "--plugins",
        text(plugins.path()),
        "--cache-dir",
        text(cache.path()),
        "--timeout",
        "1s",
        "hostile_loop",
    ]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert_eq!(
        stderr(&output),
        "error [timed_out]: hostile_loop: timed out after 1s (the per-call time limit) and was stopped; ask for less work per call or try another approach\n"
    );
}

/// A missing `--root` was "input/output error ... try again, or try another path" with the
/// OS error twice.
#[test]
fn a_missing_root_is_said_not_to_exist_once() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope");
    for args in [
        &["tools", "--root", text(&missing)][..],
        &["call", "--root", text(&missing), "list_files"][..],
    ] {
        let output = host(args);
        assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
        assert_eq!(
            stderr(&output),
            format!(
                "error: --root {} does not exist; pass an existing directory (it defaults to the current one)\n",
                missing.display()
            )
        );
    }
}

/// `-v` wrote 24,778 lines of Cranelift debug output for one plugin: dependencies stay at
/// warn, our own debug lines remain.
#[test]
fn verbose_shows_our_debug_lines_not_the_dependencies() {
    let plugins = tempfile::tempdir().unwrap();
    toolhost_tests::install(plugins.path(), &["greet"]).unwrap();
    let output = host(&[
        "-v",
        "tools",
        "--no-builtins",
        "--no-cache",
        "--plugins",
        text(plugins.path()),
    ]);
    let log = stderr(&output);
    assert_eq!(output.status.code(), Some(0), "{log}");
    // Our debug line for the plugin is there ...
    assert!(log.contains("plugin greet loaded"), "{log}");
    // ... and no flood: a handful of lines, none from the compiler.
    let lines = log.lines().count();
    assert!(
        lines < 50,
        "{lines} lines of log:\n{}",
        &log[..log.len().min(4000)]
    );
    assert!(!log.to_lowercase().contains("cranelift"), "{log}");
}

/// A summary cut at the first ". " gave grep "... such as .": every line of the table
/// ends at a sentence's end or with an ellipsis after a whole word.
#[test]
fn tools_table_summaries_end_at_a_sentence_or_a_word() {
    let root = tempfile::tempdir().unwrap();
    let output = host(&["tools", "--plan", "--root", text(root.path())]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let table = String::from_utf8(output.stdout).unwrap();
    assert_eq!(table.lines().count(), 10, "{table}");
    for line in table.lines() {
        assert!(line.ends_with('.') || line.ends_with('…'), "{line}");
        assert!(!line.ends_with(" .") && !line.ends_with(" …"), "{line}");
    }
    assert!(
        table.contains("\ngrep         Search the contents of files with a regular expression (RE2 syntax: no look-around or…\n"),
        "{table}"
    );
}

/// Broken JSON arguments to `host call` exited 1 (a tool error): it is a bad command line,
/// exit 2, with what to pass instead.
#[test]
fn malformed_call_arguments_exit_2() {
    let root = tempfile::tempdir().unwrap();
    let output = host(&["call", "--root", text(root.path()), "read_file", "{path"]);
    assert_eq!(output.status.code(), Some(EXIT_USAGE));
    assert!(output.stdout.is_empty());
    assert_eq!(
        stderr(&output),
        "error: the tool's arguments are not valid JSON (key must be a string at line 1 column 2); pass one JSON object in single quotes, e.g. host call greet '{\"name\":\"Ada\"}', or - to read it from stdin\n"
    );
    let output = host(&["call", "--root", text(root.path()), "read_file", "[1]"]);
    assert_eq!(output.status.code(), Some(EXIT_USAGE));
    assert!(
        stderr(&output)
            .starts_with("error: the tool's arguments must be a JSON object, got array; "),
        "{}",
        stderr(&output)
    );
}

/// The README quotes the panic message as the host prints it, describes the demo as
/// building every plugin, and gives the `--cache-dir` default the code uses.
#[test]
fn the_readme_quotes_what_the_code_says() {
    let readme = readme();
    // The panic row of the failure table: `ToolPanicked`: `TOOL: ... . …`
    let row = readme
        .lines()
        .find(|line| line.contains("`ToolPanicked`: `"))
        .expect("README's panic row");
    let quoted = row
        .split("`ToolPanicked`: `")
        .nth(1)
        .and_then(|rest| rest.split('`').next())
        .unwrap();
    let quoted = quoted.trim_end_matches(" …").replace("TOOL", "divide");
    let plugins = examples();
    let root = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let output = host(&[
        "call",
        "--plugins",
        text(plugins.path()),
        "--plugin-files",
        "read",
        "--root",
        text(root.path()),
        "--cache-dir",
        text(cache.path()),
        "divide",
        r#"{"by":0}"#,
    ]);
    assert_eq!(output.status.code(), Some(1));
    let printed = stderr(&output);
    assert!(
        printed.starts_with(&format!("error [tool_panicked]: {quoted}")),
        "README quotes `{quoted}`, the host printed {printed}"
    );

    // --cache-dir's default, as the help text states it.
    let help = host(&["run", "--help"]);
    let help = String::from_utf8_lossy(&help.stdout)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        help.contains("$XDG_CACHE_HOME/wasm-toolhost, else ~/.cache/wasm-toolhost"),
        "{help}"
    );
    assert!(
        readme.contains(
            "| `--cache-dir` | `$XDG_CACHE_HOME/wasm-toolhost` (else `~/.cache/wasm-toolhost`) |"
        ),
        "README's --cache-dir row"
    );

    // The demo builds every plugin of plugins/ (scripts/build-plugins builds the whole
    // workspace), and ships the examples to plugins/dist.
    assert!(!readme.contains("builds the example plugins (greet, divide, wordcount)"));
    assert!(readme.contains("builds every plugin under `plugins/`"));
}

/// At a real-time priority, runaway plugins on every core starve the epoch ticker and no
/// call times out (found running the benchmark under `chrt -f`): the host says so once.
/// Where `chrt -f 1` is not allowed the real-time half skips, saying so on stderr, unless
/// `TOOLHOST_REQUIRE_REALTIME` is set (`scripts/test` sets it where `chrt -f 1` works).
#[test]
fn a_real_time_priority_is_warned_about_once() {
    let plugins = tempfile::tempdir().unwrap();
    toolhost_tests::install(plugins.path(), &["greet", "divide"]).unwrap();
    let cache = tempfile::tempdir().unwrap();
    let args = [
        "tools",
        "--no-builtins",
        "--plugins",
        text(plugins.path()),
        "--cache-dir",
        text(cache.path()),
    ];
    let warning = "the host runs at a real-time priority (SCHED_FIFO)";
    let normal = host(&args);
    assert_eq!(normal.status.code(), Some(0), "{}", stderr(&normal));
    assert!(
        !stderr(&normal).contains("real-time"),
        "{}",
        stderr(&normal)
    );
    let chrt_works = std::process::Command::new("chrt")
        .args(["-f", "1", "true"])
        .status()
        .is_ok_and(|status| status.success());
    if !chrt_works {
        assert!(
            std::env::var_os("TOOLHOST_REQUIRE_REALTIME").is_none(),
            "TOOLHOST_REQUIRE_REALTIME is set but `chrt -f 1` is not allowed here (needs CAP_SYS_NICE)"
        );
        eprintln!(
            "skipped the real-time half: `chrt -f 1` is not allowed here (needs CAP_SYS_NICE)"
        );
        return;
    }
    let realtime = std::process::Command::new("chrt")
        .args(["-f", "1", env!("CARGO_BIN_EXE_host")])
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    assert_eq!(realtime.status.code(), Some(0), "{}", stderr(&realtime));
    assert_eq!(
        stderr(&realtime).matches(warning).count(),
        1,
        "{}",
        stderr(&realtime)
    );
}

/// `--plugin-config NAME.KEY:value` (no `=`) printed the first 40 characters of the value:
/// a secret given that way reached the terminal and the logs. No mistyped form of the
/// flag prints any part of its value, at any log level.
#[test]
fn a_mistyped_config_flag_never_prints_its_value() {
    let plugins = examples();
    for given in [
        "greet.API_TOKEN:ghp_S3CRETVALUE",
        "greet.API_TOKEN ghp_S3CRETVALUE",
        "greet.API_TOKEN:ghp_S3CRETVALUE==",
        "greet.API_TOKEN:ghp_S3CRET.VALUE=x",
        "ghp_S3CRETVALUE",
    ] {
        let output = host(&[
            "-v",
            "tools",
            "--plugins",
            text(plugins.path()),
            "--plugin-config",
            given,
        ]);
        let printed = format!(
            "{}{}",
            stderr(&output),
            String::from_utf8_lossy(&output.stdout)
        );
        assert!(
            !printed.contains("S3CRET"),
            "{given:?} printed its value:\n{printed}"
        );
        assert!(
            printed.contains("error: --plugin-config: "),
            "{given:?} must be refused:\n{printed}"
        );
        assert_eq!(output.status.code(), Some(3), "{given:?}:\n{printed}");
    }
}
