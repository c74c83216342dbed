//! Tests of argument reading: messages, paths, ranges, enums, cut text, serde attributes.

use std::collections::HashMap;
use std::fmt;

use serde::de::{self, DeserializeOwned};
use serde::Deserialize;
use serde_json::Value;

use super::*;

fn message<T: DeserializeOwned + fmt::Debug>(arguments: &str) -> String {
    parse::<T>(arguments).unwrap_err().to_string()
}

#[derive(Debug, Deserialize)]
#[allow(dead_code, reason = "the tests read the error, not the parsed fields")]
struct Sum {
    numbers: Vec<f64>,
}

#[derive(Debug, Deserialize)]
#[allow(dead_code, reason = "the tests read the error, not the parsed fields")]
#[serde(rename_all = "snake_case")]
enum Mode {
    Fast,
    Exact,
}

#[derive(Debug, Deserialize)]
#[allow(dead_code, reason = "the tests read the error, not the parsed fields")]
struct Todo {
    content: String,
    status: Mode,
    #[serde(default)]
    tags: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[allow(dead_code, reason = "the tests read the error, not the parsed fields")]
struct Plan {
    todos: Vec<Todo>,
    count: Option<u8>,
    offset: Option<i64>,
    point: Option<(i32, i32)>,
    letter: Option<char>,
}

#[derive(Debug, Deserialize)]
#[allow(dead_code, reason = "the tests read the error, not the parsed fields")]
#[serde(deny_unknown_fields)]
struct Strict {
    color: Option<String>,
    size: Option<u32>,
}

#[derive(Debug, Deserialize, PartialEq)]
#[serde(rename_all = "snake_case")]
enum Shape {
    Circle { r: f64 },
    Square(f64),
    Dot,
}

#[derive(Debug, Deserialize)]
#[allow(dead_code, reason = "the tests read the error, not the parsed fields")]
struct Draw {
    shape: Shape,
}

#[test]
fn the_issue_example() {
    assert_eq!(
        message::<Sum>(r#"{"numbers": [1, "2"]}"#),
        r#"argument "numbers[1]" must be a number, got string "2""#
    );
}

#[test]
fn types_are_named_in_json_words_with_the_path() {
    let cases = [
        (
            r#"{"todos": 3}"#,
            r#"argument "todos" must be an array, got number 3"#,
        ),
        (
            r#"{"todos": [7]}"#,
            r#"argument "todos[0]" must be an object, got number 7"#,
        ),
        (
            r#"{"todos": [{"content": 5, "status": "fast"}]}"#,
            r#"argument "todos[0].content" must be a string, got number 5"#,
        ),
        (
            r#"{"todos": [{"content": "a", "status": "fast", "tags": [true]}]}"#,
            r#"argument "todos[0].tags[0]" must be a string, got boolean true"#,
        ),
        (
            r#"{"todos": [], "offset": 1.5}"#,
            r#"argument "offset" must be an integer, got number 1.5"#,
        ),
        (
            r#"{"todos": [], "offset": "1"}"#,
            r#"argument "offset" must be an integer, got string "1""#,
        ),
        (
            r#"{"todos": null}"#,
            r#"argument "todos" must be an array, got null"#,
        ),
        (
            r#"{"todos": {}}"#,
            r#"argument "todos" must be an array, got an object"#,
        ),
    ];
    for (arguments, expected) in cases {
        assert_eq!(message::<Plan>(arguments), expected, "{arguments}");
    }
}

#[test]
fn ranges_lengths_and_characters() {
    let cases = [
        (
            r#"{"todos": [], "count": 300}"#,
            r#"argument "count" must be an integer from 0 to 255, got number 300"#,
        ),
        (
            r#"{"todos": [], "count": -1}"#,
            r#"argument "count" must be an integer from 0 to 255, got number -1"#,
        ),
        (
            r#"{"todos": [], "point": [1, 2, 3]}"#,
            r#"argument "point" must be an array of 2 elements, got 3 elements"#,
        ),
        (
            r#"{"todos": [], "point": [1]}"#,
            r#"argument "point" must be an array of 2 elements, got 1 element"#,
        ),
        (
            r#"{"todos": [], "letter": "ab"}"#,
            r#"argument "letter" must be a single character, got string "ab""#,
        ),
    ];
    for (arguments, expected) in cases {
        assert_eq!(message::<Plan>(arguments), expected, "{arguments}");
    }
}

#[test]
fn missing_unknown_and_enum_values() {
    #[derive(Debug, Deserialize)]
    #[allow(dead_code, reason = "the tests read the error, not the parsed fields")]
    struct Aliased {
        #[serde(alias = "colour")]
        color: String,
    }
    assert_eq!(message::<Plan>("{}"), r#"argument "todos" is required"#);
    assert_eq!(message::<Plan>(""), r#"argument "todos" is required"#);
    assert_eq!(
        message::<Plan>(r#"{"todos": [{"content": "a"}]}"#),
        r#"argument "todos[0].status" is required"#
    );
    assert_eq!(
        message::<Plan>(r#"{"todos": [{"content": "a", "status": "quick"}]}"#),
        r#"argument "todos[0].status" must be one of "fast", "exact", got "quick""#
    );
    assert_eq!(
        message::<Plan>(r#"{"todos": [{"content": "a", "status": 1}]}"#),
        r#"argument "todos[0].status" must be one of "fast", "exact", got number 1"#
    );
    assert_eq!(
        message::<Strict>(r#"{"colour": "red"}"#),
        r#"argument "colour" is not accepted (accepted here: "color", "size")"#
    );
    assert_eq!(
        message::<Aliased>(r#"{"color": "red", "colour": "blue"}"#),
        r#"argument "color" is given twice"#
    );
}

#[test]
fn enums_with_content() {
    let draw = |text: &str| parse::<Draw>(text).map(|draw| draw.shape);
    assert_eq!(draw(r#"{"shape": "dot"}"#), Ok(Shape::Dot));
    assert_eq!(draw(r#"{"shape": {"square": 2}}"#), Ok(Shape::Square(2.0)));
    assert_eq!(
        draw(r#"{"shape": {"circle": {"r": 1}}}"#),
        Ok(Shape::Circle { r: 1.0 })
    );
    assert_eq!(
        message::<Draw>(r#"{"shape": {"circle": {"r": "big"}}}"#),
        r#"argument "shape.circle.r" must be a number, got string "big""#
    );
    assert_eq!(
        message::<Draw>(r#"{"shape": {"circle": {}}}"#),
        r#"argument "shape.circle.r" is required"#
    );
    assert_eq!(
        message::<Draw>(r#"{"shape": "circle"}"#),
        r#"argument "shape" must be an object {"circle": ...} with the variant's content, got string "circle""#
    );
    assert_eq!(
        message::<Draw>(r#"{"shape": {"hexagon": 1}}"#),
        r#"argument "shape" must be one of "circle", "square", "dot", got "hexagon""#
    );
}

#[test]
fn the_whole_arguments() {
    assert_eq!(
        message::<Sum>("[1, 2]"),
        "the arguments must be an object, got an array"
    );
    assert_eq!(
        message::<Sum>("{\"numbers\": "),
        "the arguments are not valid JSON (EOF while parsing a value at line 1 column 11); \
             send one JSON object"
    );
    assert_eq!(parse::<HashMap<String, u8>>("  ").unwrap(), HashMap::new());
    assert_eq!(
        parse::<Value>(r#"{"a":[1,{"b":null}]}"#).unwrap()["a"][1]["b"],
        Value::Null
    );
}

#[test]
fn custom_messages_keep_their_text_at_the_path() {
    #[derive(Debug, Deserialize)]
    #[allow(dead_code, reason = "the tests read the error, not the parsed fields")]
    struct Even(#[serde(deserialize_with = "even")] u32);

    fn even<'de, D: de::Deserializer<'de>>(deserializer: D) -> Result<u32, D::Error> {
        let n = u32::deserialize(deserializer)?;
        if n % 2 == 1 {
            return Err(de::Error::custom(format!(
                "{n} is odd; pass an even number"
            )));
        }
        Ok(n)
    }

    #[derive(Debug, Deserialize)]
    #[allow(dead_code, reason = "the tests read the error, not the parsed fields")]
    struct Args {
        pairs: Vec<Even>,
    }

    assert_eq!(
        message::<Args>(r#"{"pairs": [2, 3]}"#),
        r#"argument "pairs[1]": 3 is odd; pass an even number"#
    );
}

#[test]
fn echoed_text_is_cut() {
    let long = "x".repeat(10_000);
    let text = message::<Sum>(&format!(r#"{{"numbers": ["{long}"]}}"#));
    assert_eq!(
        text,
        format!(
            r#"argument "numbers[0]" must be a number, got string "{}...""#,
            "x".repeat(MAX_QUOTED_CHARS)
        )
    );
    let text = message::<Strict>(&format!(r#"{{"{long}": 1}}"#));
    assert!(text.len() < 200, "{text}");
    assert!(text.starts_with(&format!(
        "argument \"{}...\" is not accepted",
        "x".repeat(60)
    )));
    // Quotes and control characters in a model's text stay inside the quotes.
    assert_eq!(
        message::<Sum>(r#"{"numbers": ["a\"\n"]}"#),
        r#"argument "numbers[0]" must be a number, got string "a\"\n""#
    );
}

#[test]
fn flatten_untagged_and_tagged_types_work() {
    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(untagged)]
    enum NumberOrText {
        Number(f64),
        Text(String),
    }

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(tag = "kind", rename_all = "snake_case")]
    enum Query {
        ByName { name: String },
        ById { id: u64 },
    }

    #[derive(Debug, Deserialize, PartialEq)]
    struct Args {
        value: NumberOrText,
        query: Query,
        #[serde(flatten)]
        rest: HashMap<String, Value>,
    }

    let args: Args =
        parse(r#"{"value": "x", "query": {"kind": "by_id", "id": 4}, "extra": 1}"#).unwrap();
    assert_eq!(args.value, NumberOrText::Text("x".into()));
    assert_eq!(args.query, Query::ById { id: 4 });
    assert_eq!(args.rest.get("extra"), Some(&Value::from(1)));
    assert_eq!(
        message::<Args>(r#"{"value": 1, "query": {"id": 4}}"#),
        r#"argument "query.kind" is required"#
    );
    assert_eq!(
        message::<Args>(r#"{"value": [], "query": {"kind": "by_id", "id": 4}}"#),
        r#"argument "value": data did not match any variant of untagged enum NumberOrText"#
    );
}
