//! Tests of manifest parsing and resolution.

use super::*;
use crate::{FileAccess, PluginError, PluginErrorKind, PluginHostConfig, PluginLimits};
use std::path::Path;
use std::time::Duration;

fn config(max_file_access: FileAccess) -> PluginHostConfig {
    PluginHostConfig {
        cache_dir: None,
        max_file_access,
        ..PluginHostConfig::default()
    }
}

fn resolve_text(text: &str, config: &PluginHostConfig) -> Result<Resolved, PluginError> {
    let path = Path::new("plugins/p.toml");
    apply(path, parse(path, text)?, config)
}

#[test]
fn full_manifest_parses_and_overrides_within_max() {
    let text = r#"
            [grants]
            files = "read"
            root = "docs"
            [limits]
            timeout_ms = 5000
            memory_mib = 32
            fuel = 1000000
            max_output_bytes = 4096
        "#;
    let resolved = resolve_text(text, &config(FileAccess::ReadWrite)).unwrap();
    assert_eq!(resolved.files, FileAccess::Read);
    assert_eq!(resolved.root.as_deref(), Some("docs"));
    assert_eq!(resolved.limits.timeout, Duration::from_millis(5000));
    assert_eq!(resolved.limits.memory_bytes, 32 << 20);
    assert_eq!(resolved.limits.fuel, Some(1_000_000));
    assert_eq!(resolved.limits.max_output_bytes, 4096);
    assert_eq!(
        resolved.limits.max_stderr_bytes,
        PluginLimits::default().max_stderr_bytes
    );
}

#[test]
fn empty_manifest_is_the_defaults_with_no_grant() {
    let resolved = resolve_text("", &config(FileAccess::ReadWrite)).unwrap();
    assert_eq!(resolved.files, FileAccess::None);
    assert_eq!(resolved.limits, PluginLimits::default());
}

#[test]
fn unknown_keys_are_named_with_their_line() {
    for (text, line, key) in [
        ("[grants]\nnetwork = true\n", 2, "network"),
        ("[limits]\ntimeout_ms = 5\ncpu = 3\n", 3, "cpu"),
        ("[extra]\n", 1, "extra"),
    ] {
        let err = resolve_text(text, &config(FileAccess::None)).unwrap_err();
        assert!(
            matches!(err.kind(), PluginErrorKind::Manifest { .. }),
            "{err:?}"
        );
        let message = err.to_string();
        let start =
            format!("plugins/p.toml: invalid plugin manifest: line {line}: unknown field `{key}`");
        assert!(message.starts_with(&start), "{message}");
    }
}

#[test]
fn bad_values_say_what_to_give() {
    let err = resolve_text("[grants]\nfiles = \"all\"\n", &config(FileAccess::None))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("grants.files is \"all\"; use \"none\", \"read\" or \"read-write\""),
        "{err}"
    );
    let err = resolve_text("[grants]\nroot = \"../up\"\n", &config(FileAccess::None))
        .unwrap_err()
        .to_string();
    assert!(err.contains("grants.root: argument \"root\""), "{err}");
    let err =
        resolve_text("[limits]\ntimeout_ms = \"5s\"\n", &config(FileAccess::None)).unwrap_err();
    assert!(matches!(err.kind(), PluginErrorKind::Manifest { .. }));
    let err = resolve_text("[limits]\nfuel = 0\n", &config(FileAccess::None)).unwrap_err();
    assert!(err.to_string().contains("limits.fuel is 0"), "{err}");
}

#[test]
fn deny_by_default_refuses_a_read_grant() {
    let err =
        resolve_text("[grants]\nfiles = \"read\"\n", &PluginHostConfig::default()).unwrap_err();
    match err.kind() {
        PluginErrorKind::GrantDenied { asked, allowed } => {
            assert_eq!(*asked, FileAccess::Read);
            assert_eq!(*allowed, FileAccess::None);
        }
        other => panic!("expected GrantDenied, got {other:?}"),
    }
    let err = resolve_text(
        "[grants]\nfiles = \"read-write\"\n",
        &config(FileAccess::Read),
    )
    .unwrap_err();
    assert!(matches!(
        err.kind(),
        PluginErrorKind::GrantDenied {
            asked: FileAccess::ReadWrite,
            allowed: FileAccess::Read,
            ..
        }
    ));
    // Asking for nothing is always fine.
    let ok = resolve_text("[grants]\nfiles = \"none\"\n", &PluginHostConfig::default());
    assert_eq!(ok.unwrap().files, FileAccess::None);
}

#[test]
fn limits_above_max_are_refused_with_both_values() {
    let err =
        resolve_text("[limits]\ntimeout_ms = 120000\n", &config(FileAccess::None)).unwrap_err();
    assert_eq!(
            err.to_string(),
            "plugins/p.toml: the manifest asks for timeout 120s, above the host's maximum of 10s; lower it in the manifest, or have the operator raise the maximum (--plugin-max-timeout 120s, PluginHostConfig::max_limits)"
        );
    let err = resolve_text(
        "[limits]\nmax_output_bytes = 2000000\n",
        &config(FileAccess::None),
    )
    .unwrap_err();
    assert_eq!(
            err.to_string(),
            "plugins/p.toml: the manifest asks for output 1.9 MiB, above the host's maximum of 1 MiB; lower it in the manifest, or have the operator raise the maximum (PluginHostConfig::max_limits)"
        );
    let err = resolve_text("[limits]\nmemory_mib = 1024\n", &config(FileAccess::None)).unwrap_err();
    assert!(
        matches!(
            err.kind(),
            PluginErrorKind::LimitTooHigh {
                limit: "memory",
                ..
            }
        ),
        "{err:?}"
    );
}

/// A granted root is checked with the tools' path policy at load, and the
/// error names the root and the rule.
#[test]
fn a_root_the_path_policy_refuses_is_a_load_error() {
    let hiding = PluginHostConfig {
        file_policy: toolhost::vfs::FilePolicy::default().with_hide_hidden_paths(true),
        ..config(FileAccess::ReadWrite)
    };
    for root in [".git", ".ssh", "docs/_private", "a/.config/b"] {
        let text = format!("[grants]\nfiles = \"read-write\"\nroot = \"{root}\"\n");
        match resolve_text(&text, &hiding) {
                Err(err) if matches!(err.kind(), PluginErrorKind::Manifest { .. }) => assert_eq!(
                    err.to_string(),
                    format!("plugins/p.toml: invalid plugin manifest: grants.root is \"{root}\", a hidden path (a segment starts with _ or .), and this host hides hidden paths from every tool (--hide-hidden); give a sub-directory without hidden segments, or start the host without --hide-hidden")
                ),
                other => panic!("root {root}: expected a manifest error, got {other:?}"),
            }
        // The same root is fine for a host that shows hidden paths to its tools.
        let resolved = resolve_text(&text, &config(FileAccess::ReadWrite)).unwrap();
        assert_eq!(resolved.root.as_deref(), Some(root));
    }
    assert!(resolve_text("[grants]\nfiles = \"read\"\nroot = \"docs\"\n", &hiding).is_ok());
}

#[test]
fn import_budgets_can_be_lowered_but_not_raised() {
    let text = "[limits]\nmax_file_calls = 10\nmax_read_bytes = 1024\nmax_write_bytes_per_call = 0\nmax_files_written_per_call = 5\nmax_write_bytes_total = 2048\nmax_files_written_total = 50\nlog_lines_per_second = 1\nlog_burst = 10\n";
    let resolved = resolve_text(text, &config(FileAccess::None)).unwrap();
    assert_eq!(
        resolved.limits.imports,
        crate::limits::ImportLimits {
            max_file_calls: 10,
            max_read_bytes: 1024,
            max_write_bytes_per_call: 0,
            max_files_written_per_call: 5,
            max_write_bytes_total: 2048,
            max_files_written_total: 50,
            log_lines_per_second: 1,
            log_burst: 10,
        }
    );
    let err = resolve_text(
        "[limits]\nmax_files_written_per_call = 1000\n",
        &config(FileAccess::None),
    )
    .unwrap_err();
    assert_eq!(
            err.to_string(),
            "plugins/p.toml: the manifest asks for max_files_written_per_call 1000, above the host's maximum of 100; lower it in the manifest, or have the operator raise the maximum (PluginHostConfig::max_limits)"
        );
    let mut raised = config(FileAccess::None);
    raised.max_limits.imports.max_files_written_per_call = 1000;
    let resolved = resolve_text("[limits]\nmax_files_written_per_call = 1000\n", &raised).unwrap();
    assert_eq!(resolved.limits.imports.max_files_written_per_call, 1000);
}

#[test]
fn http_grants_are_parsed_deduplicated_and_checked_against_the_operator() {
    let mut allowing = config(FileAccess::None);
    allowing.http.allow = vec!["*.example.org".parse().unwrap()];
    let text =
        "[grants]\nhttp = [\"api.example.org\", \"API.example.org:443\", \"*.cdn.example.org\"]\n";
    let resolved = resolve_text(text, &allowing).unwrap();
    let hosts: Vec<String> = resolved.http.iter().map(ToString::to_string).collect();
    assert_eq!(hosts, ["api.example.org", "*.cdn.example.org"]);
    let err = resolve_text("[grants]\nhttp = [\"example.org\"]\n", &allowing).unwrap_err();
    assert!(
        matches!(err.kind(), PluginErrorKind::HttpDenied { host } if host == "example.org"),
        "{err:?}"
    );
    let err = resolve_text("[grants]\nhttp = [\"a b\"]\n", &allowing).unwrap_err();
    assert!(
        err.to_string()
            .contains("grants.http: \"a b\" is not a host pattern"),
        "{err}"
    );
    // No http key: no grant, nothing to allow.
    assert!(resolve_text("", &config(FileAccess::None))
        .unwrap()
        .http
        .is_empty());
}

#[test]
fn config_keys_parse_in_both_forms() {
    let mut with_values = config(FileAccess::None);
    with_values.config.set_assignment("p.REGION=eu").unwrap();
    with_values.config.set_assignment("p.TOKEN=t").unwrap();
    let text = "[config]\nkeys = [\"REGION\"]\n[config.TOKEN]\ndescription = \"API token\"\nsecret = true\n[config.OPTIONAL]\nrequired = false\n";
    let resolved = resolve_text(text, &with_values).unwrap();
    let keys: Vec<(&str, bool, bool)> = resolved
        .config
        .entries()
        .iter()
        .map(|e| (e.key.name.as_str(), e.key.secret, e.key.required))
        .collect();
    assert_eq!(
        keys,
        [
            ("OPTIONAL", false, false),
            ("REGION", false, true),
            ("TOKEN", true, true)
        ]
    );
    assert_eq!(resolved.config.get("TOKEN"), Some("t"));
    for (text, expected) in [
        (
            "[config]\nkeys = [\"bad-key\"]\n",
            "config key \"bad-key\" is not a valid name",
        ),
        (
            "[config]\nkeys = [\"A\", \"A\"]\n",
            "config key A is declared twice",
        ),
        ("[config]\nA = 5\n", "config.A must be a table"),
        (
            "[config.A]\nsecrett = true\n",
            "config.A: unknown field `secrett`",
        ),
    ] {
        let err = resolve_text(text, &with_values).unwrap_err();
        assert!(
            matches!(err.kind(), PluginErrorKind::Manifest { .. }),
            "{err:?}"
        );
        assert!(err.to_string().contains(expected), "{text}: {err}");
    }
    let err = resolve_text("[config]\nkeys = [\"NEEDED\"]\n", &with_values).unwrap_err();
    assert!(
        matches!(err.kind(), PluginErrorKind::ConfigMissing { key, plugin, .. } if key == "NEEDED" && plugin == "p"),
        "{err:?}"
    );
}

#[test]
fn http_limits_can_be_lowered_but_not_raised() {
    let text = "[limits]\nmax_http_requests = 2\nmax_http_request_bytes = 10\nmax_http_response_bytes = 20\nhttp_connect_timeout_ms = 300\n";
    let resolved = resolve_text(text, &config(FileAccess::None)).unwrap();
    assert_eq!(
        resolved.limits.http,
        crate::limits::HttpLimits {
            max_requests: 2,
            max_request_bytes: 10,
            max_response_bytes: 20,
            connect_timeout: Duration::from_millis(300),
        }
    );
    let err = resolve_text(
        "[limits]\nmax_http_requests = 100\n",
        &config(FileAccess::None),
    )
    .unwrap_err();
    assert_eq!(
            err.to_string(),
            "plugins/p.toml: the manifest asks for max_http_requests 100, above the host's maximum of 16; lower it in the manifest, or have the operator raise the maximum (PluginHostConfig::max_limits)"
        );
    let err = resolve_text(
        "[limits]\nhttp_connect_timeout_ms = 0\n",
        &config(FileAccess::None),
    )
    .unwrap_err();
    assert!(
        err.to_string()
            .contains("limits.http_connect_timeout_ms is 0"),
        "{err}"
    );
}

#[test]
fn missing_manifest_is_no_grant_and_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let wasm = dir.path().join("p.wasm");
    let resolved = resolve(&wasm, &config(FileAccess::ReadWrite)).unwrap();
    assert_eq!(resolved.manifest_path, None);
    assert_eq!(resolved.files, FileAccess::None);
    std::fs::write(
        dir.path().join("p.toml"),
        "[grants]\nfiles = \"read-write\"\n",
    )
    .unwrap();
    let resolved = resolve(&wasm, &config(FileAccess::ReadWrite)).unwrap();
    assert_eq!(resolved.files, FileAccess::ReadWrite);
    assert_eq!(resolved.manifest_path, Some(dir.path().join("p.toml")));
}

#[test]
fn confirm_is_a_top_level_switch_off_by_default() {
    let path = Path::new("plugins/p.toml");
    assert!(
        parse(path, "confirm = true\n[grants]\nfiles = \"read\"\n")
            .unwrap()
            .confirm
    );
    assert!(!parse(path, "[grants]\nfiles = \"read\"\n").unwrap().confirm);
    // Not a boolean, or misspelt: refused like any bad key.
    for text in ["confirm = \"yes\"\n", "confirmed = true\n"] {
        let err = parse(path, text).unwrap_err();
        assert!(
            matches!(err.kind(), PluginErrorKind::Manifest { .. }),
            "{text}: {err}"
        );
    }
}

#[test]
fn task_settings_are_read_and_checked() {
    use toolhost::registry::TaskSupport;
    let text = "task_support = \"optional\"\n[limits]\ntask_timeout_ms = 5000\n";
    let resolved = resolve_text(text, &config(FileAccess::None)).unwrap();
    let manifest = resolved.manifest.unwrap();
    assert_eq!(manifest.task_support, Some(TaskSupport::Optional));
    assert_eq!(manifest.limits.task_timeout_ms, Some(5000));
    // None said: MCP's default, forbidden (applied by leaving the definitions as they are).
    let plain = resolve_text("", &config(FileAccess::None)).unwrap();
    assert_eq!(plain.manifest.and_then(|m| m.task_support), None);
    let err = resolve_text("task_support = \"sometimes\"\n", &config(FileAccess::None))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(
            "unknown variant `sometimes`, expected one of `forbidden`, `optional`, `required`"
        ),
        "{err}"
    );
    let err = resolve_text("[limits]\ntask_timeout_ms = 0\n", &config(FileAccess::None))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("limits.task_timeout_ms is 0; give at least 1"),
        "{err}"
    );
}

#[test]
fn tools_grants_parse_in_both_forms_and_max_tool_calls_is_bounded() {
    let path = Path::new("plugins/p.toml");
    let grants = |text: &str| parse(path, text).map(|m| m.grants.tools_grant());
    assert_eq!(grants("").unwrap(), None);
    assert_eq!(
        grants("[grants]\ntools = \"*\"\n").unwrap(),
        Some(ToolsGrant {
            tools: ToolNames::All,
            max_tool_calls: 64
        })
    );
    assert_eq!(
        grants("[grants]\ntools = [\"grep\", \"read_file\", \"grep\"]\nmax_tool_calls = 8\n")
            .unwrap(),
        Some(ToolsGrant {
            tools: ToolNames::only(["grep", "read_file"]),
            max_tool_calls: 8
        })
    );
    let error = |text: &str| grants(text).unwrap_err().to_string();
    let over = error("[grants]\ntools = \"*\"\nmax_tool_calls = 65\n");
    assert!(
        over.contains(
            "grants.max_tool_calls is 65; it must be 1 to 64 (tool calls per call of the plugin)"
        ),
        "{over}"
    );
    let alone = error("[grants]\nmax_tool_calls = 3\n");
    assert!(
        alone.contains("[grants] max_tool_calls bounds the calls of the tools the plugin may call, but it names none"),
        "{alone}"
    );
    let star = error("[grants]\ntools = \"all\"\n");
    assert!(
        star.contains("grants.tools must be \"*\" or a list of tool names"),
        "{star}"
    );
    let name = error("[grants]\ntools = [\"rm -rf\"]\n");
    assert!(
        name.contains("grants.tools names \"rm -rf\", which is not a tool name"),
        "{name}"
    );
}
