//! Tests of dispatch (arguments, unknown tools, panics, deadlines and cancellation, the
//! result cap on results and errors) and of registration.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use toolhost_sdk::schema::{object, string};

use super::*;
use crate::registry::{
    Arguments, CallContext, Environment, RegisterError, Registry, ToolCall, ToolDefinition,
    ToolError, ToolResult, DEFAULT_RESULT_CAP,
};

fn echo_registry() -> Registry {
    let registry = Registry::new();
    registry
        .register(
            ToolDefinition::new(
                "echo",
                "Echo the arguments.",
                object([("text", string("t")), ("extra", string("e"))], ["text"]),
            ),
            |_ctx: CallContext, args: Arguments, _env: Environment| async move {
                Ok(ToolResult::new(Value::Object(args.object().clone())))
            },
        )
        .unwrap();
    registry
}

async fn call(registry: &Registry, name: &str, arguments: &str) -> Result<ToolResult, ToolError> {
    registry
        .dispatch(
            &CallContext::new(),
            &ToolCall::new(name, arguments),
            &Environment::default(),
        )
        .await
}

fn invalid(err: ToolError) -> String {
    match err {
        ToolError::InvalidArguments { tool, message } => format!("{tool}: {message}"),
        other => panic!("expected InvalidArguments, got {other:?}"),
    }
}

#[tokio::test]
async fn passes_arguments_to_the_handler() {
    let registry = echo_registry();
    let result = call(&registry, "echo", r#"{"text":"hi","n":1}"#)
        .await
        .unwrap();
    assert_eq!(result.content, json!({"text": "hi", "n": 1}));
}

#[tokio::test]
async fn required_field_missing_or_null_is_invalid() {
    let registry = echo_registry();
    for args in ["{}", r#"{"text":null}"#, "", "  \n "] {
        assert_eq!(
            invalid(call(&registry, "echo", args).await.unwrap_err()),
            r#"echo: argument "text" is required"#,
            "arguments {args:?}"
        );
    }
}

#[tokio::test]
async fn non_object_arguments_are_invalid() {
    let registry = echo_registry();
    for (args, expected) in [
        ("[]", "echo: the arguments must be a JSON object, got array"),
        (
            "3",
            "echo: the arguments must be a JSON object, got integer",
        ),
        (
            "null",
            "echo: the arguments must be a JSON object, got null",
        ),
        ("not json", "echo: the arguments are not valid JSON"),
    ] {
        let message = invalid(call(&registry, "echo", args).await.unwrap_err());
        assert!(message.starts_with(expected), "{args}: {message}");
    }
}

#[tokio::test]
async fn whitespace_arguments_count_as_empty_object() {
    let registry = Registry::new();
    registry
        .register(
            ToolDefinition::new(
                "raw",
                "Return the raw arguments.",
                object(Vec::<(String, Value)>::new(), Vec::<String>::new()),
            ),
            |_ctx: CallContext, args: Arguments, _env: Environment| async move {
                Ok(ToolResult::new(args.raw().to_owned()))
            },
        )
        .unwrap();
    assert_eq!(call(&registry, "raw", " \t\n").await.unwrap().content, "{}");
}

#[tokio::test]
async fn non_object_schema_enforces_nothing() {
    let registry = Registry::new();
    registry
        .register(
            ToolDefinition::new("free", "Anything goes.", json!({"required": ["x"]})),
            |_ctx: CallContext, _args: Arguments, _env: Environment| async move {
                Ok(ToolResult::new(Value::Null))
            },
        )
        .unwrap();
    assert_eq!(
        call(&registry, "free", "{}").await.unwrap().content,
        Value::Null
    );
}

#[tokio::test]
async fn unknown_tool_names_the_tool() {
    let err = call(&echo_registry(), "multiply", "").await.unwrap_err();
    assert_eq!(
        err,
        ToolError::UnknownTool {
            name: "multiply".into()
        }
    );
    assert!(err.to_string().contains("\"multiply\""));
}

#[tokio::test]
async fn panics_are_caught_and_registry_stays_usable() {
    let registry = echo_registry();
    registry
        .register(
            ToolDefinition::new("boom", "Panics.", Value::Null),
            |_ctx: CallContext, _args: Arguments, _env: Environment| async move {
                if true {
                    panic!("kaboom {}", 42);
                }
                Ok(ToolResult::default())
            },
        )
        .unwrap();
    registry
        .register(
            ToolDefinition::new("boom_sync", "Panics before its future exists.", Value::Null),
            |_ctx: CallContext,
             _args: Arguments,
             _env: Environment|
             -> std::future::Ready<Result<ToolResult, ToolError>> {
                panic!("static message")
            },
        )
        .unwrap();
    let err = call(&registry, "boom", "{}").await.unwrap_err();
    assert_eq!(
        err,
        ToolError::ToolPanicked {
            tool: "boom".into(),
            message: "panicked: kaboom 42".into()
        }
    );
    let err = call(&registry, "boom_sync", "{}").await.unwrap_err();
    assert_eq!(
        err,
        ToolError::ToolPanicked {
            tool: "boom_sync".into(),
            message: "panicked: static message".into()
        }
    );
    // The next call works, and registration still works.
    assert_eq!(
        call(&registry, "echo", r#"{"text":"ok"}"#)
            .await
            .unwrap()
            .content,
        json!({"text":"ok"})
    );
    registry
        .register(
            ToolDefinition::new("later", "", Value::Null),
            |_c: CallContext, _a: Arguments, _e: Environment| async { Ok(ToolResult::default()) },
        )
        .unwrap();
    assert!(registry.has("later"));
}

#[tokio::test]
async fn sleeping_handler_times_out_near_the_deadline() {
    let registry = Registry::new().with_call_timeout(Duration::from_millis(200));
    registry
        .register(
            ToolDefinition::new("sleepy", "Sleeps.", Value::Null),
            |_ctx: CallContext, _args: Arguments, _env: Environment| async move {
                tokio::time::sleep(Duration::from_secs(10)).await;
                Ok(ToolResult::default())
            },
        )
        .unwrap();
    let started = Instant::now();
    let err = call(&registry, "sleepy", "{}").await.unwrap_err();
    let elapsed = started.elapsed();
    assert_eq!(
        err,
        ToolError::TimedOut {
            tool: "sleepy".into(),
            limit: Duration::from_millis(200)
        }
    );
    assert!(elapsed >= Duration::from_millis(200), "{elapsed:?}");
    assert!(elapsed < Duration::from_millis(400), "{elapsed:?}");

    // A caller deadline earlier than the registry's wins.
    let started = Instant::now();
    let err = registry
        .dispatch(
            &CallContext::with_timeout(Duration::from_millis(50)),
            &ToolCall::new("sleepy", ""),
            &Environment::default(),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, ToolError::TimedOut { .. }), "{err:?}");
    assert!(started.elapsed() < Duration::from_millis(200));
}

/// A handler that stops itself at the deadline it was given reports the time it had
/// left ("999ms"); the error names the configured limit instead.
#[tokio::test]
async fn a_handler_timing_out_at_the_deadline_reports_the_configured_limit() {
    let registry = Registry::new().with_call_timeout(Duration::from_millis(100));
    for (name, own_limit) in [("at_deadline", None), ("own_limit", Some(30))] {
        registry
            .register(
                ToolDefinition::new(name, "Times out.", Value::Null),
                move |ctx: CallContext, _args: Arguments, _env: Environment| async move {
                    let remaining = ctx.remaining().expect("dispatch sets a deadline");
                    let limit = own_limit.map_or(remaining, Duration::from_millis);
                    // Blocking, so the future is ready at its first poll, after the deadline
                    // for `at_deadline` (as a plugin stopped by an epoch tick is).
                    std::thread::sleep(limit);
                    Err(ToolError::TimedOut {
                        tool: String::new(),
                        limit,
                    })
                },
            )
            .unwrap();
    }
    assert_eq!(
        call(&registry, "at_deadline", "{}").await.unwrap_err(),
        ToolError::TimedOut {
            tool: "at_deadline".into(),
            limit: Duration::from_millis(100)
        }
    );
    assert_eq!(
        call(&registry, "own_limit", "{}").await.unwrap_err(),
        ToolError::TimedOut {
            tool: "own_limit".into(),
            limit: Duration::from_millis(30)
        }
    );
}

#[tokio::test]
async fn handler_sees_the_deadline_and_cancellation_stops_it() {
    let registry = Registry::new().with_call_timeout(Duration::from_secs(5));
    registry
        .register(
            ToolDefinition::new("wait", "Waits for cancellation.", Value::Null),
            |ctx: CallContext, _args: Arguments, _env: Environment| async move {
                let remaining = ctx.remaining().expect("dispatch sets a deadline");
                assert!(remaining <= Duration::from_secs(5));
                tokio::time::sleep(Duration::from_secs(10)).await;
                Ok(ToolResult::default())
            },
        )
        .unwrap();
    let token = tokio_util::sync::CancellationToken::new();
    let ctx = CallContext::new().with_cancellation(token.clone());
    let canceller = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(20)).await;
        token.cancel();
    });
    let err = registry
        .dispatch(&ctx, &ToolCall::new("wait", ""), &Environment::default())
        .await
        .unwrap_err();
    canceller.await.unwrap();
    assert_eq!(
        err,
        ToolError::Cancelled {
            tool: "wait".into()
        }
    );
}

#[tokio::test]
async fn oversized_result_is_an_error_with_size_and_cap() {
    let registry = Registry::new().with_result_cap(100);
    registry
        .register(
            ToolDefinition::new("big", "Big result.", Value::Null),
            |_ctx: CallContext, args: Arguments, _env: Environment| async move {
                let n = args.optional_u64("n")?.unwrap_or(0) as usize;
                Ok(ToolResult::new("x".repeat(n)))
            },
        )
        .unwrap();
    // 98 characters + 2 quotes = exactly the cap.
    assert!(call(&registry, "big", r#"{"n":98}"#).await.is_ok());
    let err = call(&registry, "big", r#"{"n":99}"#).await.unwrap_err();
    assert_eq!(
        err,
        ToolError::ResultTooLarge {
            tool: "big".into(),
            size: 101,
            cap: 100
        }
    );
    assert!(err.to_string().contains("101 bytes"));
    assert!(err.to_string().contains("100-byte limit"));
}

#[tokio::test]
async fn handler_errors_get_the_tool_name() {
    let registry = Registry::new();
    registry
        .register(
            ToolDefinition::new("fails", "Fails.", Value::Null),
            |_ctx: CallContext, _args: Arguments, _env: Environment| async move {
                Err::<ToolResult, _>(ToolError::failed("no such thing; try another"))
            },
        )
        .unwrap();
    let err = call(&registry, "fails", "").await.unwrap_err();
    assert_eq!(
        err,
        ToolError::Failed {
            tool: "fails".into(),
            message: "no such thing; try another".into()
        }
    );
}

/// 15 MiB: the argument size the echo was reproduced with.
const HUGE: usize = 15 * 1024 * 1024;

/// The error's text as the model gets it, JSON-encoded as results are measured.
fn error_len(err: &ToolError) -> usize {
    encoded_len(&Value::String(err.to_string()))
}

/// A cut text's kept part and the number of bytes its note says were cut.
fn split_cut(text: &str) -> (&str, usize) {
    let (kept, note) = text.rsplit_once("... (").expect("a cut note");
    let cut = note
        .strip_suffix(" more bytes cut)")
        .expect("the note's wording")
        .parse()
        .expect("a byte count");
    (kept, cut)
}

/// `echo_err` fails with its argument `text` in an error of the kind `kind` names.
fn echo_error_registry(cap: usize) -> Registry {
    let registry = Registry::new().with_result_cap(cap);
    registry
        .register(
            ToolDefinition::new(
                "echo_err",
                "Fails with its argument.",
                object([("text", string("t")), ("kind", string("k"))], ["text"]),
            ),
            |_ctx: CallContext, args: Arguments, _env: Environment| async move {
                let text = args.required_str("text")?.to_owned();
                match args.optional_str("kind")? {
                    Some("invalid") => {
                        Err(args.invalid(format!("argument \"text\" must be a path, got {text:?}")))
                    }
                    Some("panic") => panic!("cannot handle {text}"),
                    Some("limit") => Err(ToolError::LimitExceeded {
                        tool: String::new(),
                        limit: crate::registry::Limit::Fuel { units: 1 },
                        message: text,
                    }),
                    Some("file") => Err(ToolError::FileTooLarge {
                        tool: String::new(),
                        path: text,
                        size: 2,
                        limit: 1,
                    }),
                    Some("tool") => Err(ToolError::Failed {
                        tool: text,
                        message: "x".into(),
                    }),
                    _ => Err(ToolError::failed(format!("no file named {text}"))),
                }
            },
        )
        .unwrap();
    registry
}

async fn echo_error(registry: &Registry, text: &str, kind: &str) -> ToolError {
    let arguments = json!({"text": text, "kind": kind}).to_string();
    call(registry, "echo_err", &arguments).await.unwrap_err()
}

#[tokio::test]
async fn an_error_echoing_a_15_mib_argument_is_cut_to_the_result_cap() {
    let registry = echo_error_registry(DEFAULT_RESULT_CAP);
    // Two-byte characters: a cut at a plain byte count would split one.
    let text = "é".repeat(HUGE / 2);
    let err = echo_error(&registry, &text, "failed").await;
    let ToolError::Failed { tool, message } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(tool, "echo_err");
    let (kept, cut) = split_cut(message);
    assert!(kept.starts_with("no file named éé"), "{kept}");
    assert_eq!(kept.len() + cut, "no file named ".len() + text.len());
    let len = error_len(&err);
    assert!(len <= DEFAULT_RESULT_CAP, "{len} bytes");
    assert!(
        len > DEFAULT_RESULT_CAP - 40,
        "cut more than needed: {len} bytes"
    );
}

#[tokio::test]
async fn every_error_kind_is_held_to_the_result_cap() {
    let registry = echo_error_registry(DEFAULT_RESULT_CAP);
    // 1 MiB, 16 times the cap: the cut does not depend on how far over it a text is,
    // and the 15 MiB case is the test above.
    let text = "x".repeat(1 << 20);
    for (kind, expected) in [
        ("invalid", "invalid_arguments"),
        ("panic", "tool_panicked"),
        ("limit", "limit_exceeded"),
        ("file", "file_too_large"),
        ("tool", "failed"),
        ("failed", "failed"),
    ] {
        let err = echo_error(&registry, &text, kind).await;
        assert_eq!(err.kind(), expected);
        let len = error_len(&err);
        assert!(len <= DEFAULT_RESULT_CAP, "{kind}: {len} bytes");
        assert!(err.to_string().contains(" more bytes cut)"), "{kind}");
    }
    // Control characters take 6 bytes each once JSON-encoded: the cap counts that.
    let err = echo_error(&registry, &"\u{1}".repeat(1 << 20), "failed").await;
    assert!(
        error_len(&err) <= DEFAULT_RESULT_CAP,
        "{} bytes",
        error_len(&err)
    );
    // The name of an unknown tool is echoed too.
    let err = call(&registry, &"y".repeat(1 << 20), "{}")
        .await
        .unwrap_err();
    assert_eq!(err.kind(), "unknown_tool");
    assert!(
        error_len(&err) <= DEFAULT_RESULT_CAP,
        "{} bytes",
        error_len(&err)
    );
    // An argument error of dispatch's own that quotes the input stays whole when short.
    let err = call(&registry, "echo_err", "{").await.unwrap_err();
    assert!(!err.to_string().contains("bytes cut"), "{err}");
}

#[tokio::test]
async fn an_error_exactly_at_the_cap_is_whole_one_byte_more_is_cut() {
    let cap = 200;
    let registry = echo_error_registry(cap);
    // "echo_err: no file named " + text, and two quotes.
    let fits = cap - 2 - "echo_err: no file named ".len();
    let err = echo_error(&registry, &"a".repeat(fits), "failed").await;
    assert_eq!(error_len(&err), cap);
    assert!(!err.to_string().contains("bytes cut"), "{err}");
    let err = echo_error(&registry, &"a".repeat(fits + 1), "failed").await;
    assert!(error_len(&err) <= cap, "{err}");
    let ToolError::Failed { message, .. } = &err else {
        panic!("{err:?}")
    };
    let (kept, cut) = split_cut(message);
    assert_eq!(kept.len() + cut, "no file named ".len() + fits + 1);
}

#[test]
fn registration_rules() {
    let registry = echo_registry();
    let noop =
        |_c: CallContext, _a: Arguments, _e: Environment| async { Ok(ToolResult::default()) };
    assert_eq!(
        registry.register(ToolDefinition::new("", "", Value::Null), noop),
        Err(RegisterError::EmptyName)
    );
    assert_eq!(
        registry.register(ToolDefinition::new("echo", "", Value::Null), noop),
        Err(RegisterError::DuplicateTool {
            name: "echo".into()
        })
    );
    assert_eq!(
        registry.register(ToolDefinition::new("has space", "", Value::Null), noop),
        Err(RegisterError::InvalidName {
            name: "has space".into()
        })
    );
    assert_eq!(
        registry.register(ToolDefinition::new("x".repeat(129), "", Value::Null), noop),
        Err(RegisterError::InvalidName {
            name: "x".repeat(129)
        })
    );
    assert!(registry
        .register(ToolDefinition::new("x".repeat(128), "", Value::Null), noop)
        .is_ok());
    assert_eq!(
        registry.register_shared(ToolDefinition::new("none", "", Value::Null), None),
        Err(RegisterError::MissingHandler {
            name: "none".into()
        })
    );
    assert!(!registry.has("none"));
}

#[test]
fn register_all_is_all_or_nothing() {
    let registry = echo_registry();
    let handler: Arc<dyn crate::registry::Handler> =
        Arc::new(|_c: CallContext, _a: Arguments, _e: Environment| async {
            Ok(ToolResult::default())
        });
    let batch = |names: &[&str]| {
        names
            .iter()
            .map(|name| {
                (
                    ToolDefinition::new(*name, "", Value::Null),
                    Arc::clone(&handler),
                )
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(
        registry.register_all(batch(&["a", "echo", "b"])),
        Err(RegisterError::DuplicateTool {
            name: "echo".into()
        })
    );
    assert_eq!(
        registry.register_all(batch(&["a", "a"])),
        Err(RegisterError::DuplicateTool { name: "a".into() })
    );
    assert_eq!(
        registry.register_all(batch(&["a", "bad name"])),
        Err(RegisterError::InvalidName {
            name: "bad name".into()
        })
    );
    assert_eq!(registry.names(), ["echo"]);
    registry.register_all(batch(&["a", "b"])).unwrap();
    assert_eq!(registry.names(), ["echo", "a", "b"]);
}

#[test]
fn registration_order_is_kept_over_1000_tools() {
    let registry = Registry::new();
    let handler: Arc<dyn crate::registry::Handler> =
        Arc::new(|_c: CallContext, _a: Arguments, _e: Environment| async {
            Ok(ToolResult::default())
        });
    // Names in an order that is neither sorted nor hash order.
    let names: Vec<String> = (0..1000)
        .map(|i| format!("tool_{}", (i * 7919) % 1000))
        .collect();
    for name in &names {
        registry
            .register_shared(
                ToolDefinition::new(name.clone(), "", Value::Null),
                Some(Arc::clone(&handler)),
            )
            .unwrap();
    }
    let listed: Vec<String> = registry.definitions().into_iter().map(|d| d.name).collect();
    assert_eq!(listed, names);
    assert_eq!(registry.len(), 1000);
    assert!(registry.has("tool_999") && !registry.has("tool_1000"));
}

#[test]
fn registry_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Registry>();
}
