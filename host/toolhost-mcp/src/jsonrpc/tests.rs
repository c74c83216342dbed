use serde_json::value::RawValue;
use serde_json::{json, Value};

use super::parse::MAX_BATCH_LEN;
use super::*;

#[test]
fn ids_are_kept_as_sent() {
    let id = RequestId::parse("18446744073709551616").unwrap();
    assert_eq!(id.as_json(), "18446744073709551616");
    assert_eq!(RequestId::from("x").as_json(), r#""x""#);
    assert_eq!(RequestId::null().as_json(), "null");
    assert!(RequestId::parse("[1]").is_none() && RequestId::parse("null").is_none());
}

fn err(line: &str) -> RpcError {
    parse_line(line.as_bytes()).unwrap_err()
}

fn id(json: &str) -> RequestId {
    RequestId::parse(json).unwrap()
}

#[test]
fn request_notification_and_response() {
    assert_eq!(
        parse_line(br#"{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{"cursor":"a"}}"#),
        Ok(Incoming::Request {
            id: RequestId::from(7),
            method: "tools/list".into(),
            params: Params::parse(r#"{"cursor":"a"}"#).unwrap(),
        })
    );
    assert_eq!(
        parse_line(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#),
        Ok(Incoming::Notification {
            method: "notifications/initialized".into(),
            params: Params::default(),
        })
    );
    assert_eq!(
        parse_line(br#"{"jsonrpc":"2.0","id":"x","result":{}}"#),
        Ok(Incoming::Response {
            id: RequestId::from("x"),
            body: ResponseBody::Result("{}".into()),
        })
    );
}

#[test]
fn ids_and_params_keep_the_text_as_sent() {
    for text in [
        "18446744073709551616",
        "-9223372036854775809",
        "1e400",
        "1.50",
        "-0",
        r#""\u0078""#,
    ] {
        let line = format!(r#"{{"jsonrpc":"2.0","id": {text} ,"method":"ping"}}"#);
        let Ok(Incoming::Request { id, .. }) = parse_line(line.as_bytes()) else {
            panic!("{line}")
        };
        assert_eq!(id.as_json(), text);
    }
    // A string id is one request however its text escapes it; a number is its text.
    assert_eq!(id(r#""\u0078""#).key(), id(r#""x""#).key());
    assert_ne!(id("1.0").key(), id("1").key());
    assert_ne!(
        id("18446744073709551616").key(),
        id("18446744073709551617").key()
    );

    let Ok(Incoming::Request { params, .. }) = parse_line(
        br#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"big":1e400, "n" : 18446744073709551617,"s":"a\"b","o":{"k":[1, 2]}}}"#,
    ) else {
        panic!()
    };
    assert_eq!(params.len(), 4);
    assert_eq!(params.raw("big").map(RawValue::get), Some("1e400"));
    assert_eq!(
        params.value("big"),
        None,
        "beyond f64: no value, but its text"
    );
    assert_eq!(
        params.raw("n").map(RawValue::get),
        Some("18446744073709551617")
    );
    assert_eq!(params.str("s").as_deref(), Some("a\"b"));
    assert_eq!(params.str("o"), None);
    assert_eq!(params.raw("o").map(RawValue::get), Some(r#"{"k":[1, 2]}"#));
    assert_eq!(params.value("o"), Some(json!({"k": [1, 2]})));
    assert!(params.raw("missing").is_none());
}

#[test]
fn garbage_is_a_parse_error_with_null_id() {
    let e = err("this is not json");
    assert_eq!((e.id.clone(), e.code), (RequestId::null(), PARSE_ERROR));
    assert_eq!(
        e.message,
        "Parse error: the line is not valid JSON (expected ident at line 1 column 2); send one JSON-RPC 2.0 message per line"
    );
    assert_eq!(err("{\"jsonrpc\":").code, PARSE_ERROR);
    assert_eq!(err(r#"{"jsonrpc":"2.0"} x"#).code, PARSE_ERROR);
    assert_eq!(parse_line(b"\xff\xfe").unwrap_err().code, PARSE_ERROR);
    assert_eq!(
        parse_line(b"{\"jsonrpc\":\"2.0\",\"id\":\"\xff\",\"method\":\"ping\"}")
            .unwrap_err()
            .code,
        PARSE_ERROR
    );
}

/// Found by the `jsonrpc_line` fuzz target: with a repeated "id" the server answered
/// the last one, where another reader of the line would take the first.
#[test]
fn a_repeated_member_is_an_invalid_request() {
    for line in [
        r#"{"jsonrpc":"2.0","id":3,"monrpc":"2.0","id":1,"method":"ping"}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"ping","method":"tools/list"}"#,
        r#"{"jsonrpc":"2.0","jsonrpc":"2.0","id":1,"method":"ping"}"#,
    ] {
        let error = err(line);
        assert_eq!(
            (error.id.clone(), error.code),
            (RequestId::null(), INVALID_REQUEST),
            "{line}"
        );
        assert!(
            error.message.contains("appears more than once"),
            "{}",
            error.message
        );
    }
    assert_eq!(
        err(r#"{"jsonrpc":"2.0","id":3,"id":1,"method":"ping"}"#).message,
        "Invalid Request: the member \"id\" appears more than once, so the message is ambiguous; send each member once; expected a JSON-RPC 2.0 message"
    );
}

/// Member names are read borrowed from the line, and "2.0" compared as sent: an escaped
/// name or version is still the same member or version, never a second one.
#[test]
fn escaped_names_and_versions_are_read_as_decoded() {
    assert_eq!(
        parse_line(br#"{"jsonrpc":"2\u002e0","\u0069d":5,"m\u0065thod":"ping"}"#),
        Ok(Incoming::Request {
            id: id("5"),
            method: "ping".into(),
            params: Params::default(),
        })
    );
    // An escaped spelling of a member given plainly too is a repeated member.
    let error = err(r#"{"jsonrpc":"2.0","id":1,"\u0069d":2,"method":"ping"}"#);
    assert_eq!(
        error.message,
        "Invalid Request: the member \"id\" appears more than once, so the message is ambiguous; send each member once; expected a JSON-RPC 2.0 message"
    );
    for version in [r#""2.00""#, r#"" 2.0""#, r#""2\u002e1""#, "2.0", "null"] {
        let line = format!(r#"{{"jsonrpc":{version},"id":1,"method":"ping"}}"#);
        let error = err(&line);
        assert_eq!(
            (error.id, error.code, error.message.as_str()),
            (
                id("1"),
                INVALID_REQUEST,
                "Invalid Request: \"jsonrpc\" must be \"2.0\"; expected a JSON-RPC 2.0 message"
            ),
            "{line}"
        );
    }
}

#[test]
fn invalid_requests() {
    let cases = [
        (
            r#"[1,2]"#,
            RequestId::null(),
            "a batch (array); batches are only accepted once protocol version 2025-03-26 is negotiated, send one message per line",
        ),
        (r#"42"#, RequestId::null(), "not a JSON object"),
        (r#""x""#, RequestId::null(), "not a JSON object"),
        (
            r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#,
            RequestId::null(),
            "\"id\" must be a string or a number, got null",
        ),
        (
            r#"{"jsonrpc":"2.0","id":{},"method":"ping"}"#,
            RequestId::null(),
            "\"id\" must be a string or a number, got object",
        ),
        (
            r#"{"jsonrpc":"2.0","id":true,"method":"ping"}"#,
            RequestId::null(),
            "\"id\" must be a string or a number, got boolean",
        ),
        (
            r#"{"id":1,"method":"ping"}"#,
            RequestId::from(1),
            "\"jsonrpc\" must be \"2.0\"",
        ),
        (
            r#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#,
            RequestId::from(1),
            "\"jsonrpc\" must be \"2.0\"",
        ),
        (
            r#"{"jsonrpc":2.0,"id":1,"method":"ping"}"#,
            RequestId::from(1),
            "\"jsonrpc\" must be \"2.0\"",
        ),
        (
            r#"{"jsonrpc":"2.0","id":7}"#,
            RequestId::from(7),
            "\"method\" is missing",
        ),
        (
            r#"{"jsonrpc":"2.0"}"#,
            RequestId::null(),
            "\"method\" is missing",
        ),
        (
            r#"{"jsonrpc":"2.0","id":"a","method":5}"#,
            RequestId::from("a"),
            "\"method\" must be a string, got number",
        ),
    ];
    for (line, id, what) in cases {
        assert_eq!(
            err(line),
            RpcError::new(
                id,
                INVALID_REQUEST,
                format!("Invalid Request: {what}; expected a JSON-RPC 2.0 message")
            ),
            "{line}"
        );
    }
    // An escaped "2.0" is "2.0".
    assert!(parse_line(br#"{"jsonrpc":"2\u002e0","id":1,"method":"ping"}"#).is_ok());
}

#[test]
fn params_must_be_an_object() {
    assert_eq!(
        err(r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":[1]}"#),
        RpcError::new(
            RequestId::from(3),
            INVALID_PARAMS,
            "Invalid params: \"params\" of tools/call must be an object, got array"
        )
    );
    // A null params is read as none.
    assert_eq!(
        parse_line(br#"{"jsonrpc":"2.0","id":3,"method":"ping","params":null}"#),
        Ok(Incoming::Request {
            id: RequestId::from(3),
            method: "ping".into(),
            params: Params::default()
        })
    );
}

#[test]
fn batches_are_read_member_by_member() {
    assert_eq!(
        parse_batch(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#),
        None
    );
    let members = parse_batch(
        br#" [{"jsonrpc":"2.0","id":1,"method":"ping"}, 5, {"jsonrpc":"2.0","method":"n"}, [1]]"#,
    )
    .unwrap()
    .unwrap();
    assert_eq!(members.len(), 4);
    assert!(matches!(&members[0], Ok(Incoming::Request { method, .. }) if method == "ping"));
    assert_eq!(members[1].as_ref().unwrap_err().code, INVALID_REQUEST);
    assert!(matches!(&members[2], Ok(Incoming::Notification { .. })));
    assert_eq!(members[3].as_ref().unwrap_err().code, INVALID_REQUEST);
    assert_eq!(parse_batch(b"[").unwrap().unwrap_err().code, PARSE_ERROR);
    let empty = parse_batch(b"[]").unwrap().unwrap_err();
    assert_eq!(
        (empty.code, empty.message.as_str()),
        (
            INVALID_REQUEST,
            "Invalid Request: an empty batch; expected a JSON-RPC 2.0 message"
        )
    );
    let long = format!("[{}]", vec!["1"; MAX_BATCH_LEN + 1].join(","));
    assert!(parse_batch(long.as_bytes())
        .unwrap()
        .unwrap_err()
        .message
        .contains("a batch of 65 messages"));
}

#[test]
fn null_ids_are_left_out_when_asked() {
    let err = RpcError::new(RequestId::null(), PARSE_ERROR, "bad");
    assert_eq!(
        err.encode_with(false),
        r#"{"error":{"code":-32700,"message":"bad"},"jsonrpc":"2.0"}"#
    );
    assert_eq!(
        err.encode_with(true),
        r#"{"error":{"code":-32700,"message":"bad"},"id":null,"jsonrpc":"2.0"}"#
    );
    // A readable id is always given.
    let err = RpcError::new(RequestId::from(4), UNSUPPORTED_PROTOCOL_VERSION, "v")
        .with_data(json!({"supported": ["2026-07-28"], "requested": "x"}));
    assert_eq!(
        err.encode_with(false),
        r#"{"error":{"code":-32022,"data":{"requested":"x","supported":["2026-07-28"]},"message":"v"},"id":4,"jsonrpc":"2.0"}"#
    );
}

#[test]
fn response_shapes() {
    assert_eq!(
        encode_response(&id("18446744073709551616"), "{}"),
        r#"{"id":18446744073709551616,"jsonrpc":"2.0","result":{}}"#
    );
    assert_eq!(
        RpcError::new(RequestId::null(), PARSE_ERROR, "bad \"x\"").encode(),
        r#"{"error":{"code":-32700,"message":"bad \"x\""},"id":null,"jsonrpc":"2.0"}"#
    );
    assert_eq!(
        RpcError::new(id(r#""\u0078""#), INVALID_PARAMS, "m").encode(),
        r#"{"error":{"code":-32602,"message":"m"},"id":"\u0078","jsonrpc":"2.0"}"#
    );
    // Each line is JSON whose id is the request's.
    let line: Value = serde_json::from_str(&encode_response(&RequestId::from("a"), "[1]")).unwrap();
    assert_eq!(line, json!({"jsonrpc":"2.0","id":"a","result":[1]}));
}
