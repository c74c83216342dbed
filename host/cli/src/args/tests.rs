//! The command line as clap parses it: defaults, every flag, bad values, and the help.

use super::*;
use clap::CommandFactory;

fn parse(args: &[&str]) -> Cli {
    Cli::try_parse_from(std::iter::once("host").chain(args.iter().copied())).unwrap()
}

#[test]
fn definition_is_valid() {
    Cli::command().debug_assert();
}

#[test]
fn max_walks_is_a_whole_number_of_at_least_one() {
    let Command::Run(run) = parse(&["run", "--max-walks", "3"]).command else {
        panic!("not run")
    };
    assert_eq!(run.registry.max_walks, NonZeroUsize::new(3));
    for (bad, says) in [
        (
            "0",
            "0 would let no list_files, glob or grep call run; give at least 1",
        ),
        (
            "two",
            "\"two\" is not a whole number; give how many file walks may run at once, e.g. 2",
        ),
    ] {
        let err = Cli::try_parse_from(["host", "run", "--max-walks", bad]).unwrap_err();
        assert!(err.to_string().contains(says), "{err}");
    }
}

#[test]
fn defaults() {
    let Command::Run(run) = parse(&["run"]).command else {
        panic!("not run")
    };
    assert_eq!(run.max_in_flight.get(), 64);
    assert_eq!(run.max_queued_calls.get(), 256);
    let r = run.registry;
    assert_eq!(r.plugins, None);
    assert_eq!(r.root, PathBuf::from("."));
    assert!(!r.read_only && !r.disable_extended && !r.hide_hidden && !r.no_builtins && !r.plan);
    assert_eq!(r.allowed_extensions(), None);
    assert_eq!(r.max_file_bytes, 1 << 20);
    assert_eq!(r.max_read_bytes, 64 << 20);
    assert_eq!(r.max_walks, None);
    assert_eq!(r.timeout, Duration::from_secs(30));
    assert_eq!(r.plugin_files, PluginFiles::None);
    assert_eq!(
        (r.plugin_timeout, r.plugin_memory, r.cache_dir),
        (None, None, None)
    );
    assert!(!r.no_cache);
    assert_eq!(
        (
            r.plugin_max_timeout,
            r.plugin_max_memory,
            r.plugin_pool_memory
        ),
        (None, None, None)
    );
}

#[test]
fn every_flag() {
    let cli = parse(&[
        "run",
        "--plugins",
        "p",
        "--root",
        "/r",
        "--read-only",
        "--disable-extended",
        "--hide-hidden",
        "--allow-ext",
        ".md,txt, ",
        "--max-file-bytes",
        "2MiB",
        "--max-read-bytes",
        "8MiB",
        "--timeout",
        "500ms",
        "--no-builtins",
        "--plan",
        "--plugin-files",
        "read-write",
        "--plugin-timeout",
        "10s",
        "--plugin-memory",
        "64MiB",
        "--plugin-max-timeout",
        "20s",
        "--plugin-max-memory",
        "128MiB",
        "--plugin-pool-memory",
        "2GiB",
        "--cache-dir",
        "/c",
        "--max-in-flight",
        "3",
        "--max-queued-calls",
        "5",
        "-vv",
    ]);
    assert_eq!(cli.verbose, 2);
    let Command::Run(run) = cli.command else {
        panic!("not run")
    };
    assert_eq!(run.max_in_flight.get(), 3);
    assert_eq!(run.max_queued_calls.get(), 5);
    let r = run.registry;
    assert_eq!(r.plugins, Some(PathBuf::from("p")));
    assert_eq!(r.root, PathBuf::from("/r"));
    assert!(r.read_only && r.disable_extended && r.hide_hidden && r.no_builtins && r.plan);
    assert_eq!(
        r.allowed_extensions(),
        Some(vec![".md".into(), ".txt".into()])
    );
    assert_eq!(r.max_file_bytes, 2 << 20);
    assert_eq!(r.max_read_bytes, 8 << 20);
    assert_eq!(r.timeout, Duration::from_millis(500));
    assert_eq!(r.plugin_files, PluginFiles::ReadWrite);
    assert_eq!(r.plugin_timeout, Some(Duration::from_secs(10)));
    assert_eq!(r.plugin_memory, Some(64 << 20));
    assert_eq!(r.plugin_max_timeout, Some(Duration::from_secs(20)));
    assert_eq!(r.plugin_max_memory, Some(128 << 20));
    assert_eq!(r.plugin_pool_memory, Some(2 << 30));
    assert_eq!(r.cache_dir, Some(PathBuf::from("/c")));
}

#[test]
fn call_and_inspect() {
    let Command::Call(call) = parse(&["call", "--plan", "todo_write", r#"{"todos":[]}"#]).command
    else {
        panic!("not call")
    };
    assert_eq!(
        (call.name.as_str(), call.arguments.as_str()),
        ("todo_write", r#"{"todos":[]}"#)
    );
    let Command::Call(call) = parse(&["call", "list_files"]).command else {
        panic!("not call")
    };
    assert_eq!(call.arguments, "{}");
    let Command::Inspect(inspect) = parse(&["inspect", "x.wasm", "--json"]).command else {
        panic!("not inspect")
    };
    assert_eq!(
        (inspect.file, inspect.json),
        (PathBuf::from("x.wasm"), true)
    );
}

#[test]
fn bad_values_are_usage_errors() {
    let err = Cli::try_parse_from(["host", "run", "--timeout", "30"]).unwrap_err();
    assert_eq!(err.kind(), clap::error::ErrorKind::ValueValidation);
    assert!(err.to_string().contains("\"30\" has no unit"), "{err}");
    let err = Cli::try_parse_from(["host", "run", "--plugin-files", "all"]).unwrap_err();
    assert_eq!(err.kind(), clap::error::ErrorKind::InvalidValue);
    let err = Cli::try_parse_from(["host", "run", "--no-cache", "--cache-dir", "/c"]).unwrap_err();
    assert_eq!(err.kind(), clap::error::ErrorKind::ArgumentConflict);
    let err = Cli::try_parse_from(["host", "run", "--max-in-flight", "0"]).unwrap_err();
    assert_eq!(err.kind(), clap::error::ErrorKind::ValueValidation);
    assert!(
        err.to_string()
            .contains("0 would let no tool call run; give at least 1 (default 64)"),
        "{err}"
    );
    let err = Cli::try_parse_from(["host", "run", "--max-in-flight", "many"]).unwrap_err();
    assert!(
        err.to_string().contains("\"many\" is not a whole number"),
        "{err}"
    );
}

#[test]
fn shipping_flags() {
    let Command::Pull(pull) = parse(&[
        "pull",
        "oci://127.0.0.1:5000/t/greet:1",
        "--plugins",
        "p",
        "--name",
        "hello",
        "--update",
        "--registry-user",
        "ada",
        "--registry-password-env",
        "PW",
        "--insecure-registry",
        "reg.lan:5000",
        "--insecure-registry",
        "other",
        "--max-plugin-bytes",
        "1MiB",
        "--registry-timeout",
        "5s",
        "--registry-deadline",
        "90s",
    ])
    .command
    else {
        panic!("not pull")
    };
    assert_eq!(pull.reference, "oci://127.0.0.1:5000/t/greet:1");
    assert_eq!(
        (pull.plugins, pull.name.as_deref(), pull.update),
        (PathBuf::from("p"), Some("hello"), true)
    );
    let r = pull.registry;
    assert_eq!(
        (
            r.registry_user.as_deref(),
            r.registry_password_env.as_deref()
        ),
        (Some("ada"), Some("PW"))
    );
    assert_eq!(r.insecure_registry, ["reg.lan:5000", "other"]);
    assert_eq!(r.max_plugin_bytes, 1 << 20);
    assert_eq!(r.registry_timeout, Duration::from_secs(5));
    assert_eq!(r.registry_deadline, Duration::from_secs(90));
    let Command::Push(push) = parse(&["push", "g.wasm", "oci://h/r:1"]).command else {
        panic!("not push")
    };
    assert_eq!(push.file, PathBuf::from("g.wasm"));
    assert_eq!(push.registry.max_plugin_bytes, 64 << 20);
    assert_eq!(push.registry.registry_timeout, Duration::from_secs(30));
    assert_eq!(push.registry.registry_deadline, Duration::from_secs(600));
    assert!(push.registry.insecure_registry.is_empty());
    // A user without the variable holding the password (and the reverse) is refused.
    for args in [
        &[
            "pull",
            "oci://h/r:1",
            "--plugins",
            "p",
            "--registry-user",
            "ada",
        ][..],
        &[
            "push",
            "g.wasm",
            "oci://h/r:1",
            "--registry-password-env",
            "PW",
        ],
    ] {
        let err =
            Cli::try_parse_from(std::iter::once("host").chain(args.iter().copied())).unwrap_err();
        assert_eq!(
            err.kind(),
            clap::error::ErrorKind::MissingRequiredArgument,
            "{args:?}"
        );
    }
    let Command::Tools(tools) = parse(&["tools", "--plugins", "p", "--require-lock"]).command
    else {
        panic!("not tools")
    };
    assert!(tools.registry.require_lock);
    let err = Cli::try_parse_from(["host", "tools", "--require-lock"]).unwrap_err();
    assert_eq!(err.kind(), clap::error::ErrorKind::MissingRequiredArgument);
}

#[test]
fn every_subcommand_help_has_an_example() {
    let mut cli = Cli::command();
    for name in ["run", "tools", "call", "inspect", "lock", "pull", "push"] {
        let help = cli
            .find_subcommand_mut(name)
            .unwrap()
            .render_long_help()
            .to_string();
        assert!(help.contains("Examples:\n"), "{name}: {help}");
        assert!(help.contains(&format!("host {name} ")), "{name}: {help}");
    }
}

#[test]
fn task_flags() {
    let Command::Run(run) = parse(&["run"]).command else {
        panic!("not run")
    };
    let t = &run.tasks;
    assert_eq!(
        (t.task_timeout, t.task_ttl),
        (Duration::from_secs(600), Duration::from_secs(3600))
    );
    assert_eq!(
        (
            t.max_tasks.get(),
            t.max_tasks_per_session.get(),
            t.max_task_result_bytes.get()
        ),
        (1024, 64, 64 << 20)
    );
    let Command::Serve(serve) = parse(&[
        "serve",
        "--http",
        "127.0.0.1:0",
        "--task-timeout",
        "2m",
        "--task-ttl",
        "5m",
        "--max-tasks",
        "10",
        "--max-tasks-per-session",
        "2",
        "--max-task-result-bytes",
        "1MiB",
    ])
    .command
    else {
        panic!("not serve")
    };
    let limits = serve.tasks.apply(toolhost_mcp::McpLimits::new());
    assert_eq!(
        (limits.task_timeout(), limits.task_ttl()),
        (Duration::from_secs(120), Duration::from_secs(300))
    );
    assert_eq!(
        (
            limits.max_tasks().get(),
            limits.max_tasks_per_session().get(),
            limits.max_task_result_bytes().get()
        ),
        (10, 2, 1 << 20)
    );
    for (flag, value, says) in [
        (
            "--task-timeout",
            "0s",
            "the duration must be more than zero",
        ),
        ("--task-ttl", "10", "\"10\" has no unit"),
        (
            "--max-tasks",
            "0",
            "0 would refuse every task; give at least 1",
        ),
        (
            "--max-tasks-per-session",
            "x",
            "\"x\" is not a whole number",
        ),
        (
            "--max-task-result-bytes",
            "0",
            "0 would fail every task's result",
        ),
    ] {
        let err = Cli::try_parse_from(["host", "run", flag, value]).unwrap_err();
        assert_eq!(
            err.kind(),
            clap::error::ErrorKind::ValueValidation,
            "{flag}"
        );
        assert!(err.to_string().contains(says), "{flag}: {err}");
    }
}

#[test]
fn task_flags_are_in_the_help_of_run_and_serve() {
    let mut cli = Cli::command();
    for name in ["run", "serve"] {
        let help = cli
            .find_subcommand_mut(name)
            .unwrap()
            .render_long_help()
            .to_string();
        for (flag, default) in [
            ("--task-timeout <DURATION>", "[default: 10m]"),
            ("--task-ttl <DURATION>", "[default: 1h]"),
            ("--max-tasks <N>", "[default: 1024]"),
            ("--max-tasks-per-session <N>", "[default: 64]"),
            ("--max-task-result-bytes <SIZE>", "[default: 64MiB]"),
        ] {
            let at = help
                .find(flag)
                .unwrap_or_else(|| panic!("{name}: no {flag}"));
            let next = help[at + flag.len()..]
                .find("\n  -")
                .map_or(help.len(), |end| at + flag.len() + end);
            assert!(
                help[at..next].contains(default),
                "{name} {flag}: {}",
                &help[at..next]
            );
        }
    }
}

#[test]
fn audit_and_metrics_flags_parse_and_are_in_the_help_of_run_and_serve() {
    let Command::Run(args) = parse(&[
        "run",
        "--audit-log",
        "/var/log/a.jsonl",
        "--audit-log-max-bytes",
        "1MiB",
        "--audit-log-keep",
        "3",
        "--metrics",
        "9464",
    ])
    .command
    else {
        panic!("run")
    };
    assert_eq!(
        args.observe.audit_log.as_deref(),
        Some(std::path::Path::new("/var/log/a.jsonl"))
    );
    assert_eq!(args.observe.audit_log_max_bytes, Some(1 << 20));
    assert_eq!(args.observe.audit_log_keep, 3);
    assert_eq!(
        args.observe.metrics,
        Some("127.0.0.1:9464".parse().unwrap())
    );
    assert!(!args.observe.audit_arguments && !args.observe.metrics_public);

    for (flags, says) in [
        (
            &[
                "--audit-log",
                "a",
                "--audit-log-max-bytes",
                "1",
                "--audit-log-keep",
                "0",
            ][..],
            "keep no rotated file",
        ),
        (
            &[
                "--audit-log",
                "a",
                "--audit-log-max-bytes",
                "1",
                "--audit-log-keep",
                "1001",
            ][..],
            "at most 1000",
        ),
        (&["--metrics", "example.com:80"][..], "is not an address"),
    ] {
        let err = Cli::try_parse_from(["host", "run"].iter().chain(flags)).unwrap_err();
        assert!(err.to_string().contains(says), "{flags:?}: {err}");
    }
    // The audit sub-flags need --audit-log.
    let err = Cli::try_parse_from(["host", "run", "--audit-arguments"]).unwrap_err();
    assert_eq!(err.kind(), clap::error::ErrorKind::MissingRequiredArgument);

    let mut cli = Cli::command();
    for name in ["run", "serve"] {
        let help = cli
            .find_subcommand_mut(name)
            .unwrap()
            .render_long_help()
            .to_string();
        for flag in [
            "--audit-log <FILE>",
            "--audit-arguments",
            "--audit-log-max-bytes <SIZE>",
            "--audit-log-keep <N>",
            "--metrics <ADDR>",
            "--metrics-public",
        ] {
            assert!(help.contains(flag), "{name}: no {flag}");
        }
        assert!(
            help.contains("calls are refused rather than run unaudited"),
            "{name}"
        );
    }
}

#[test]
fn oauth_flags_parse_and_need_an_audience_and_http() {
    let Command::Serve(serve) = parse(&[
        "serve",
        "--http",
        "8080",
        "--oauth-issuer",
        "https://a.example.com",
        "--oauth-issuer",
        "http://127.0.0.1:9000",
        "--oauth-audience",
        "https://mcp.example.com/mcp",
        "--oauth-scope",
        "mcp:tools",
        "--oauth-insecure-issuer",
    ])
    .command
    else {
        panic!("serve")
    };
    assert_eq!(
        serve.http.oauth_issuer,
        ["https://a.example.com", "http://127.0.0.1:9000"]
    );
    assert_eq!(
        serve.http.oauth_audience.as_deref(),
        Some("https://mcp.example.com/mcp")
    );
    assert_eq!(serve.http.oauth_scope, ["mcp:tools"]);
    assert!(serve.http.oauth_insecure_issuer);
    for flags in [
        // An issuer without the audience its tokens must name.
        &[
            "serve",
            "--http",
            "8080",
            "--oauth-issuer",
            "https://a.example.com",
        ][..],
        // The audience or a scope without an issuer.
        &[
            "serve",
            "--http",
            "8080",
            "--oauth-audience",
            "https://m/mcp",
        ][..],
        &["serve", "--http", "8080", "--oauth-scope", "s"][..],
        // OAuth without --http.
        &[
            "serve",
            "--oauth-issuer",
            "https://a",
            "--oauth-audience",
            "https://m",
        ][..],
    ] {
        let err =
            Cli::try_parse_from(std::iter::once("host").chain(flags.iter().copied())).unwrap_err();
        assert_eq!(
            err.kind(),
            clap::error::ErrorKind::MissingRequiredArgument,
            "{flags:?}"
        );
    }
}

#[test]
fn policy_flag_is_in_the_help_of_run_and_serve_and_needs_http() {
    let mut cli = Cli::command();
    for name in ["run", "serve"] {
        let help = cli
            .find_subcommand_mut(name)
            .unwrap()
            .render_long_help()
            .to_string();
        let at = help
            .find("--policy <FILE>")
            .unwrap_or_else(|| panic!("{name}: no --policy"));
        assert!(help[at..].contains("at most 1 MiB"), "{name}");
    }
    let err = Cli::try_parse_from(["host", "run", "--policy", "p.toml"]).unwrap_err();
    assert_eq!(
        err.kind(),
        clap::error::ErrorKind::MissingRequiredArgument,
        "{err}"
    );
}

#[test]
fn state_flags_are_in_the_help_of_serve_and_need_http_and_state() {
    let mut cli = Cli::command();
    let help = cli
        .find_subcommand_mut("serve")
        .unwrap()
        .render_long_help()
        .to_string();
    for (flag, says) in [
        ("--state <URL>", "Never with a password in it"),
        ("--state-password-file <FILE>", "The Redis password"),
        ("--task-lease <DURATION>", "[default: 30s]"),
    ] {
        let at = help
            .find(flag)
            .unwrap_or_else(|| panic!("no {flag} in serve --help"));
        assert!(help[at..].contains(says), "{flag}: {says}");
    }
    for args in [
        &["host", "serve", "--state", "redis://127.0.0.1:6379/0"][..],
        &[
            "host",
            "serve",
            "--http",
            "8080",
            "--state-password-file",
            "p",
        ][..],
        &["host", "serve", "--http", "8080", "--task-lease", "5s"][..],
    ] {
        let err = Cli::try_parse_from(args).unwrap_err();
        assert_eq!(
            err.kind(),
            clap::error::ErrorKind::MissingRequiredArgument,
            "{args:?}: {err}"
        );
    }
    for lease in ["500ms", "2h"] {
        let err = Cli::try_parse_from([
            "host",
            "serve",
            "--http",
            "8080",
            "--state",
            "redis://127.0.0.1:6379/0",
            "--task-lease",
            lease,
        ])
        .unwrap_err();
        assert!(err.to_string().contains("outside 1s..1h"), "{lease}: {err}");
    }
}
