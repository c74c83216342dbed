//! Tests of configuration values, what a plugin gets, and redaction.

use super::*;
use std::path::Path;

fn no_env(_: &str) -> Option<String> {
    None
}

#[test]
fn assignments_parse_and_errors_never_repeat_the_value() {
    let mut values = ConfigValues::default();
    values.set_assignment("gh.TOKEN=a=b.c").unwrap();
    assert_eq!(values.get("gh", "TOKEN").unwrap().expose(), "a=b.c");
    values.set_assignment("my.plugin.KEY=v").unwrap();
    assert_eq!(values.get("my.plugin", "KEY").unwrap().expose(), "v");
    let err = values.set_assignment("ghTOKEN=hunter2").unwrap_err();
    assert_eq!(
            err.to_string(),
            "\"ghTOKEN=…\" is not NAME.KEY=VALUE: before the `=` give the plugin's name, a dot and the key, e.g. greet.API_TOKEN"
        );
    let err = values.set_assignment("hunter2").unwrap_err();
    assert_eq!(err, ConfigError::MissingEquals { chars: 7 });
    let err = values.set_assignment("gh.bad-key=hunter2").unwrap_err();
    assert_eq!(
        err,
        ConfigError::BadGivenName {
            what: "config key",
            after: Some("gh".into()),
            chars: 7,
            reason: "use letters, digits and _, not starting with a digit (like an environment variable, e.g. GITHUB_TOKEN)",
        }
    );
    assert_eq!(
        err.to_string(),
        "the config key after \"gh.\" (7 characters, not shown: a mistyped separator may have put part of a value in it) is not a valid name: use letters, digits and _, not starting with a digit (like an environment variable, e.g. GITHUB_TOKEN)"
    );
    assert!(!err.to_string().contains("hunter2"));
    let err = values.set_assignment("gh.K=a\0b").unwrap_err();
    assert_eq!(
        err.to_string(),
        "the value of gh.K holds a NUL byte, which no environment variable may"
    );
    let big = format!("gh.K={}", "x".repeat(MAX_CONFIG_VALUE_BYTES + 1));
    assert!(matches!(
        values.set_assignment(&big),
        Err(ConfigError::BadValue { .. })
    ));
    assert!(!format!("{values:?}").contains("a=b.c"));
}

#[test]
fn env_values_only_when_named() {
    let env = |var: &str| (var == "MY_TOKEN").then(|| "from-env".to_owned());
    let mut values = ConfigValues::default();
    values.set_from_env("gh.TOKEN=MY_TOKEN", env).unwrap();
    assert_eq!(values.get("gh", "TOKEN").unwrap().expose(), "from-env");
    let err = values.set_from_env("gh.OTHER", env).unwrap_err();
    assert_eq!(
        err,
        ConfigError::MissingEnv {
            plugin: "gh".into(),
            key: "OTHER".into(),
            var: "OTHER".into()
        }
    );
}

#[test]
fn files_parse_with_env_sources_and_errors_keep_values_out() {
    let env = |var: &str| (var == "GH").then(|| "tok".to_owned());
    let mut values = ConfigValues::default();
    values
        .apply_file_text(
            Path::new("c.toml"),
            "[gh]\nREPO = \"octo/hello\"\nTOKEN = { env = \"GH\" }\n",
            env,
        )
        .unwrap();
    assert_eq!(values.get("gh", "REPO").unwrap().expose(), "octo/hello");
    assert_eq!(values.get("gh", "TOKEN").unwrap().expose(), "tok");
    let err = values
        .apply_file_text(Path::new("c.toml"), "[gh]\nTOKEN = \"hunter2\n", no_env)
        .unwrap_err();
    assert_eq!(err.to_string(), "c.toml: not valid TOML at line 2; write one [PLUGIN] table of KEY = \"value\" or KEY = { env = \"VAR\" } lines per plugin");
    let err = values
        .apply_file_text(Path::new("c.toml"), "[gh]\nTOKEN = 5\n", no_env)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "c.toml: gh.TOKEN: give a string (\"...\") or { env = \"VAR\" }"
    );
    let err = values
        .apply_file_text(Path::new("c.toml"), "TOKEN = \"hunter2\"\n", no_env)
        .unwrap_err();
    assert!(!err.to_string().contains("hunter2"), "{err}");
}

fn key(name: &str, secret: bool, required: bool) -> ConfigKey {
    ConfigKey {
        name: name.into(),
        description: None,
        secret,
        required,
    }
}

#[test]
fn a_plugin_gets_exactly_its_declared_keys() {
    let mut values = ConfigValues::default();
    values.set_assignment("gh.TOKEN=t0k3n").unwrap();
    values.set_assignment("gh.TYPO=x").unwrap();
    values.set_assignment("other.TOKEN=not-yours").unwrap();
    let declared = [key("TOKEN", true, true), key("REGION", false, false)];
    let (config, undeclared) = PluginConfig::resolve("gh", &declared, &values, true).unwrap();
    assert_eq!(undeclared, ["TYPO"]);
    assert_eq!(config.get("TOKEN"), Some("t0k3n"));
    assert_eq!(config.get("REGION"), None);
    assert_eq!(config.get("TYPO"), None);
    assert_eq!(config.keys(), ["TOKEN"]);
    assert_eq!(config.env().collect::<Vec<_>>(), [("TOKEN", "t0k3n")]);
    assert!(!format!("{config:?}").contains("t0k3n"));
    let missing =
        PluginConfig::resolve("other", &declared[..1], &ConfigValues::default(), true).unwrap_err();
    assert_eq!(missing.name, "TOKEN");
    let (lenient, _) =
        PluginConfig::resolve("other", &declared[..1], &ConfigValues::default(), false).unwrap();
    assert_eq!(lenient.entries()[0].value, None);
}

#[test]
fn redaction_replaces_every_secret_and_cut_first_lines() {
    let redactor = Redactor::new(["abc".to_owned(), "abcdef".to_owned(), String::new()]);
    assert_eq!(
        redactor.redact("x abcdef y abc"),
        "x [REDACTED] y [REDACTED]"
    );
    assert_eq!(redactor.redact_tail("def\nok abc", true), "ok [REDACTED]");
    assert_eq!(redactor.redact_tail("def\nok", false), "def\nok");
    assert_eq!(Redactor::default().redact_tail("def\nok", true), "def\nok");
}

/// A secret given with a mistyped separator (`NAME.KEY:VALUE`, a space, a base64 value's
/// trailing `=`, a value with dots) must never come back in an error, its `Debug`, or the
/// values' `Debug`: the message goes to the terminal and to logs.
#[test]
fn mistyped_assignments_never_quote_any_part_of_the_value() {
    const SECRET: &str = "ghp_S3CRET";
    let assignments = [
        format!("gh.TOKEN:{SECRET}"),
        format!("gh.TOKEN {SECRET}"),
        format!("gh.TOKEN:{SECRET}dGVzdA=="),
        format!("gh.TOKEN:{SECRET}.v2=x"),
        format!("gh.TOKEN:{SECRET}.v2"),
        format!("gh:{SECRET}=x"),
        format!("gh TOKEN {SECRET}=x"),
        SECRET.to_owned(),
        format!("{SECRET}.x"),
    ];
    let env = |var: &str| Some(format!("value of {var}"));
    for text in &assignments {
        let mut values = ConfigValues::default();
        let err = values
            .set_assignment(text)
            .expect_err(&format!("{text:?} must be refused"));
        for shown in [err.to_string(), format!("{err:?}"), format!("{values:?}")] {
            assert!(
                !shown.contains("S3CRET"),
                "{text:?} showed its value: {shown}"
            );
        }
        // `ghp_S3CRET.x` is a valid `NAME.KEY` source (plugin `ghp_S3CRET`, key `x`).
        if let Err(err) = values.set_from_env(text, env) {
            assert!(!err.to_string().contains("S3CRET"), "{text:?}: {err}");
        }
    }
    let mut values = ConfigValues::default();
    let err = values
        .set_assignment(&format!("gh.TOKEN:{SECRET}"))
        .unwrap_err();
    assert_eq!(err, ConfigError::MissingEquals { chars: 19 });
    assert_eq!(
        err.to_string(),
        "a configuration assignment of 19 characters (not shown: it may hold a value) has no `=`; write NAME.KEY=VALUE, e.g. greet.API_TOKEN=..., and give secrets with --plugin-config-env or --plugin-config-file so they stay out of the process list"
    );
    let err = values
        .set_assignment(&format!("gh:{SECRET}=x"))
        .unwrap_err();
    assert!(
        matches!(
            err,
            ConfigError::BadGivenName {
                what: "NAME.KEY before the `=`",
                after: None,
                chars: 13,
                ..
            }
        ),
        "{err:?}"
    );
    // A value with dots and a stray `:` before the `=` no longer sets a key of a plugin
    // named `gh.TOKEN:ghp_S3CRET`.
    let err = values
        .set_assignment(&format!("gh.TOKEN:{SECRET}.v2=x"))
        .unwrap_err();
    assert!(
        matches!(
            err,
            ConfigError::BadGivenName {
                what: "plugin name",
                after: None,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(values.is_empty());
}
