//! JSON Schema helpers for tool parameters.
//!
//! Schemas are explicit JSON Schema values, written once when a tool is declared. Every
//! helper returns a [`serde_json::Value`] whose object keys are inserted in sorted order, so
//! serialising the same schema always gives the same bytes, whatever order the properties
//! were listed in and whether or not some other crate turned on `serde_json`'s
//! `preserve_order` feature.
//!
//! ```
//! use toolhost_sdk::schema::{integer, object, string};
//!
//! let parameters = object(
//!     [("path", string("File to read.")), ("offset", integer("1-based line."))],
//!     ["path"],
//! );
//! assert_eq!(
//!     serde_json::to_string(&parameters)?,
//!     r#"{"properties":{"offset":{"description":"1-based line.","type":"integer"},"path":{"description":"File to read.","type":"string"}},"required":["path"],"type":"object"}"#
//! );
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::BTreeMap;

use serde_json::{Map, Value};

/// Builds a JSON object from key/value pairs, inserting the keys in sorted order.
fn sorted_object<K: Into<String>>(entries: impl IntoIterator<Item = (K, Value)>) -> Value {
    let sorted: BTreeMap<String, Value> = entries.into_iter().map(|(k, v)| (k.into(), v)).collect();
    let mut map = Map::new();
    for (key, value) in sorted {
        map.insert(key, value);
    }
    Value::Object(map)
}

/// A schema `{"type": kind, "description": description}`.
fn typed(kind: &str, description: &str) -> Value {
    sorted_object([
        ("description", Value::from(description)),
        ("type", Value::from(kind)),
    ])
}

/// An object schema with the given properties; `required` lists the property names the
/// caller must give (dispatch refuses a call that omits one or passes JSON `null`).
///
/// The `required` list keeps the order given; property keys are sorted.
pub fn object<K, R>(
    properties: impl IntoIterator<Item = (K, Value)>,
    required: impl IntoIterator<Item = R>,
) -> Value
where
    K: Into<String>,
    R: Into<String>,
{
    let required: Vec<Value> = required
        .into_iter()
        .map(|name| Value::String(name.into()))
        .collect();
    let mut entries = vec![
        ("properties", sorted_object(properties)),
        ("type", Value::from("object")),
    ];
    if !required.is_empty() {
        entries.push(("required", Value::Array(required)));
    }
    sorted_object(entries)
}

/// A string parameter.
pub fn string(description: &str) -> Value {
    typed("string", description)
}

/// An integer parameter.
pub fn integer(description: &str) -> Value {
    typed("integer", description)
}

/// A number (integer or fraction) parameter.
pub fn number(description: &str) -> Value {
    typed("number", description)
}

/// A boolean parameter.
pub fn boolean(description: &str) -> Value {
    typed("boolean", description)
}

/// A string parameter restricted to `values`.
pub fn enumeration<V: Into<String>>(
    description: &str,
    values: impl IntoIterator<Item = V>,
) -> Value {
    let values: Vec<Value> = values
        .into_iter()
        .map(|v| Value::String(v.into()))
        .collect();
    sorted_object([
        ("description", Value::from(description)),
        ("enum", Value::Array(values)),
        ("type", Value::from("string")),
    ])
}

/// An array parameter whose elements follow `items`.
pub fn array(items: Value, description: &str) -> Value {
    sorted_object([
        ("description", Value::from(description)),
        ("items", items),
        ("type", Value::from("array")),
    ])
}

/// The names an object schema lists in its top-level `required` array.
///
/// A value that is not an object schema, or has no `required` array, yields nothing: only
/// the top level is enforced by dispatch, and a schema it cannot read enforces nothing.
pub fn required_fields(schema: &Value) -> Vec<String> {
    let Some(object) = schema.as_object() else {
        return Vec::new();
    };
    if object.get("type").and_then(Value::as_str) != Some("object") {
        return Vec::new();
    }
    object
        .get("required")
        .and_then(Value::as_array)
        .map(|names| {
            names
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_bytes_whatever_the_insertion_order() {
        let names = ["zeta", "alpha", "mid", "beta", "omega"];
        let reference =
            serde_json::to_string(&object(names.iter().map(|n| (*n, string(n))), ["alpha"]))
                .unwrap();
        for round in 0..100 {
            let mut order: Vec<&str> = names.to_vec();
            order.rotate_left(round % names.len());
            if round % 2 == 1 {
                order.reverse();
            }
            let built = object(order.iter().map(|n| (*n, string(n))), ["alpha"]);
            assert_eq!(serde_json::to_string(&built).unwrap(), reference);
        }
        assert!(reference.starts_with(r#"{"properties":{"alpha":"#));
    }

    #[test]
    fn helpers_give_exact_shapes() {
        assert_eq!(
            serde_json::to_string(&enumeration("Mode.", ["a", "b"])).unwrap(),
            r#"{"description":"Mode.","enum":["a","b"],"type":"string"}"#
        );
        assert_eq!(
            serde_json::to_string(&array(number("n"), "Numbers.")).unwrap(),
            r#"{"description":"Numbers.","items":{"description":"n","type":"number"},"type":"array"}"#
        );
        assert_eq!(
            serde_json::to_string(&boolean("b")).unwrap(),
            r#"{"description":"b","type":"boolean"}"#
        );
        // No required list when nothing is required.
        assert_eq!(
            serde_json::to_string(&object([("x", integer("x"))], Vec::<String>::new())).unwrap(),
            r#"{"properties":{"x":{"description":"x","type":"integer"}},"type":"object"}"#
        );
    }

    #[test]
    fn required_fields_reads_only_object_schemas() {
        let schema = object([("a", string("a")), ("b", string("b"))], ["b", "a"]);
        assert_eq!(required_fields(&schema), vec!["b", "a"]);
        assert!(required_fields(&string("x")).is_empty());
        assert!(required_fields(&Value::Null).is_empty());
        assert!(required_fields(&serde_json::json!({"required": ["a"]})).is_empty());
    }
}
