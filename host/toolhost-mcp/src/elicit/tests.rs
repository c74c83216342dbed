//! Tests of the restricted schema (the conformance suite's SEP-1034 defaults and
//! SEP-1330 enum forms) and of the session's questions.

use serde_json::json;

use super::schema::{check_answer, check_schema};
use super::*;

#[test]
fn the_newest_forms_with_defaults_and_every_enum_form_are_accepted() {
    // elicitation-sep1034-client-defaults.
    let defaults = json!({"type": "object", "properties": {
        "name": {"type": "string", "description": "User name", "default": "John Doe"},
        "age": {"type": "integer", "description": "User age", "default": 30},
        "score": {"type": "number", "description": "User score", "default": 95.5},
        "status": {"type": "string", "enum": ["active", "inactive", "pending"], "default": "active"},
        "verified": {"type": "boolean", "default": true},
    }, "required": []});
    assert_eq!(check_schema(&defaults), Ok(()));
    let answer =
        json!({"name": "John Doe", "age": 30, "score": 95.5, "status": "active", "verified": true});
    assert_eq!(check_answer(&defaults, &answer), Ok(()));
    // elicitation-sep1330-enums: untitled, titled, legacy titled, and both multi-selects.
    let enums = json!({"type": "object", "properties": {
        "untitled": {"type": "string", "enum": ["a", "b"]},
        "titled": {"type": "string", "oneOf": [{"const": "a", "title": "A"}, {"const": "b", "title": "B"}]},
        "legacy": {"type": "string", "enum": ["a", "b"], "enumNames": ["A", "B"]},
        "many": {"type": "array", "items": {"type": "string", "enum": ["x", "y"]}, "minItems": 1, "maxItems": 2, "default": ["x"]},
        "many_titled": {"type": "array", "items": {"anyOf": [{"const": "x", "title": "X"}]}},
    }, "required": ["untitled"]});
    assert_eq!(check_schema(&enums), Ok(()));
    let answer = json!({"untitled": "a", "titled": "b", "legacy": "a", "many": ["x", "y"], "many_titled": ["x"]});
    assert_eq!(check_answer(&enums, &answer), Ok(()));
}

#[test]
fn schemas_elicitation_cannot_show_are_refused() {
    for (schema, why) in [
        (
            json!({"type": "object", "properties": {"a": {"type": "object"}}}),
            "\"type\" must be",
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "string", "$ref": "#/x"}}}),
            "\"$ref\" is not allowed",
        ),
        (
            json!({"type": "object", "properties": {}, "additionalProperties": true}),
            "\"additionalProperties\"",
        ),
        (
            json!({"type": "array", "properties": {}}),
            "\"type\": \"object\"",
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["b"]}),
            "not one of the properties",
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "string", "enum": ["x"], "default": "y"}}}),
            "its default",
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "string", "enum": ["x"], "enumNames": []}}}),
            "non-empty",
        ),
    ] {
        let err = check_schema(&schema).unwrap_err();
        assert!(err.contains(why), "{schema}: {err}");
    }
}

#[test]
fn answers_that_do_not_match_are_refused() {
    let schema = json!({"type": "object", "properties": {
        "n": {"type": "integer", "minimum": 1, "maximum": 5},
        "s": {"type": "string", "maxLength": 3},
        "c": {"type": "array", "items": {"type": "string", "enum": ["x", "y"]}, "maxItems": 2},
    }, "required": ["n"]});
    for (answer, why) in [
        (json!({"n": 1.5}), "must be an integer"),
        (json!({"n": 9}), "outside the allowed range"),
        (json!({"n": 1, "s": "long"}), "outside the allowed length"),
        (json!({"n": 1, "c": ["x", "x"]}), "chosen twice"),
        (json!({"n": 1, "c": ["z"]}), "not one of the choices"),
        (json!({"s": "ab"}), "the required field \"n\" is missing"),
        (json!({"n": 1, "extra": 1}), "not a field of the question"),
        (json!([1]), "must be a JSON object"),
    ] {
        let err = check_answer(&schema, &answer).unwrap_err();
        assert!(err.contains(why), "{answer}: {err}");
    }
}

#[test]
fn questions_are_bounded_per_session_and_unknown_answers_are_counted_not_delivered() {
    let questions = Questions::default();
    let mut open = Vec::new();
    for _ in 0..MAX_OPEN_QUESTIONS {
        open.push(questions.open().ok().unwrap());
    }
    assert!(matches!(questions.open(), Err(OpenError::Full)));
    questions.answer(
        &RequestId::from("toolhost-ask-x-0"),
        ResponseBody::Result("{}".into()),
    );
    assert_eq!(questions.ignored(), 1);
    let (id, mut receiver) = open.pop().unwrap();
    questions.answer(&id, ResponseBody::Result("{\"action\":\"decline\"}".into()));
    assert_eq!(
        receiver.try_recv().unwrap(),
        ResponseBody::Result("{\"action\":\"decline\"}".into())
    );
    // Answered once: the same id again is unknown.
    questions.answer(&id, ResponseBody::Result("{}".into()));
    assert_eq!(questions.ignored(), 2);
    assert_eq!(questions.open_count(), MAX_OPEN_QUESTIONS - 1);
    // Another session's questions have other ids.
    let other = Questions::default();
    let (other_id, _) = other.open().ok().unwrap();
    assert_ne!(other_id, open[0].0);
}

/// 2025-06-18's schema has no multiple choice: such a question is refused before it is
/// sent to a client of that revision (naming the field), and goes out from 2025-11-25 on.
#[test]
fn a_multiple_choice_is_asked_only_of_revisions_that_have_one() {
    let schema = json!({"type": "object", "properties": {
        "name": {"type": "string"},
        "colors": {"type": "array", "items": {"type": "string", "enum": ["red", "green"]}},
    }});
    let refused =
        super::answer::question_params(Revision::V2025_06_18, "Which?".into(), schema.clone())
            .unwrap_err();
    match refused {
        toolhost::registry::InteractionError::Invalid(message) => {
            assert!(message.contains("\"colors\""), "{message}");
            assert!(message.contains("2025-06-18"), "{message}");
            assert!(message.contains("multiple choice"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    for revision in [Revision::V2025_11_25, Revision::V2026_07_28] {
        let params =
            super::answer::question_params(revision, "Which?".into(), schema.clone()).unwrap();
        assert_eq!(params["requestedSchema"], schema, "{revision}");
    }
    let single = json!({"type": "object", "properties": {"name": {"type": "string"}}});
    let params =
        super::answer::question_params(Revision::V2025_06_18, "Who?".into(), single.clone())
            .unwrap();
    assert_eq!(params["requestedSchema"], single);
}
