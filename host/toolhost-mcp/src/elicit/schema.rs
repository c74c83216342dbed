//! The restricted schema MCP elicitation allows (a flat object of string, number,
//! integer, boolean and enum properties), and answers checked against it.
//!
//! A property is one of (2025-11-25, with SEP-1034 `default`s and SEP-1330 enums):
//! - `{"type":"string"}` with `minLength`, `maxLength`, `format` (email, uri, date,
//!   date-time; shown by the client, not checked here) and a string `default`;
//! - `{"type":"number"}` or `{"type":"integer"}` with `minimum`, `maximum`, `default`;
//! - `{"type":"boolean"}` with a `default`;
//! - a single choice: `{"type":"string","enum":[...]}` (optionally with the legacy
//!   `enumNames`), or `{"type":"string","oneOf":[{"const":..,"title":..}]}`;
//! - a multiple choice: `{"type":"array","items":{"type":"string","enum":[...]}}` or
//!   `{"type":"array","items":{"anyOf":[{"const":..,"title":..}]}}`, with `minItems`,
//!   `maxItems` and an array `default`.
//!
//! Every property may have a `title` and a `description`. Anything else (nesting, `$ref`,
//! unknown keywords) is refused, so the user is never shown a question the client cannot
//! render faithfully.

use serde_json::{Map, Value};

/// Checks that `schema` is a question elicitation can show.
///
/// # Errors
/// What is not allowed, for the asking tool.
pub(crate) fn check_schema(schema: &Value) -> Result<(), String> {
    let Some(top) = schema.as_object() else {
        return Err("the requested schema must be a JSON object".to_owned());
    };
    for key in top.keys() {
        if !matches!(
            key.as_str(),
            "$schema" | "type" | "properties" | "required" | "title" | "description"
        ) {
            return Err(format!(
                "the requested schema has {key:?}, which elicitation does not allow; use type, properties and required"
            ));
        }
    }
    if top.get("type").and_then(Value::as_str) != Some("object") {
        return Err("the requested schema must have \"type\": \"object\"".to_owned());
    }
    let Some(properties) = top.get("properties").and_then(Value::as_object) else {
        return Err("the requested schema must have \"properties\", an object".to_owned());
    };
    for (name, property) in properties {
        check_property(property).map_err(|why| format!("property {name:?}: {why}"))?;
    }
    if let Some(required) = top.get("required") {
        let Some(names) = required.as_array() else {
            return Err("\"required\" must be an array of property names".to_owned());
        };
        for name in names {
            match name.as_str() {
                Some(name) if properties.contains_key(name) => {}
                _ => {
                    return Err(format!(
                        "\"required\" names {name}, which is not one of the properties"
                    ))
                }
            }
        }
    }
    Ok(())
}

/// The kinds of property, read from its keywords.
enum Kind<'a> {
    Text {
        min: Option<u64>,
        max: Option<u64>,
        choices: Option<Vec<&'a str>>,
    },
    Number {
        integer: bool,
        min: Option<f64>,
        max: Option<f64>,
    },
    Boolean,
    Choices {
        choices: Vec<&'a str>,
        min: Option<u64>,
        max: Option<u64>,
    },
}

fn allowed(property: &Map<String, Value>, keys: &[&str]) -> Result<(), String> {
    for key in property.keys() {
        if !matches!(key.as_str(), "type" | "title" | "description" | "default")
            && !keys.contains(&key.as_str())
        {
            return Err(format!("{key:?} is not allowed here"));
        }
    }
    for key in ["title", "description"] {
        if property.get(key).is_some_and(|value| !value.is_string()) {
            return Err(format!("{key:?} must be a string"));
        }
    }
    Ok(())
}

fn count(property: &Map<String, Value>, key: &str) -> Result<Option<u64>, String> {
    match property.get(key) {
        None => Ok(None),
        Some(value) => value
            .as_u64()
            .map(Some)
            .ok_or_else(|| format!("{key:?} must be a non-negative integer")),
    }
}

fn bound(property: &Map<String, Value>, key: &str) -> Result<Option<f64>, String> {
    match property.get(key) {
        None => Ok(None),
        Some(value) => value
            .as_f64()
            .map(Some)
            .ok_or_else(|| format!("{key:?} must be a number")),
    }
}

/// The strings of `values` (an `enum`), or of the `const`s of titled options.
fn strings(values: Option<&Value>, titled: bool) -> Result<Vec<&str>, String> {
    let Some(values) = values.and_then(Value::as_array).filter(|v| !v.is_empty()) else {
        return Err("the choices must be a non-empty array".to_owned());
    };
    values
        .iter()
        .map(|value| {
            let value = if titled {
                let Some(option) = value.as_object() else {
                    return Err("each option must be {\"const\": ..., \"title\": ...}".to_owned());
                };
                if option.keys().any(|key| key != "const" && key != "title") {
                    return Err("each option must be {\"const\": ..., \"title\": ...}".to_owned());
                }
                option.get("const").unwrap_or(&Value::Null)
            } else {
                value
            };
            value
                .as_str()
                .ok_or_else(|| "each choice must be a string".to_owned())
        })
        .collect()
}

fn kind(property: &Value) -> Result<Kind<'_>, String> {
    let Some(property) = property.as_object() else {
        return Err("must be a JSON object".to_owned());
    };
    match property.get("type").and_then(Value::as_str) {
        Some("string") => {
            allowed(
                property,
                &[
                    "minLength",
                    "maxLength",
                    "format",
                    "enum",
                    "enumNames",
                    "oneOf",
                ],
            )?;
            let choices = match (property.get("enum"), property.get("oneOf")) {
                (Some(_), Some(_)) => return Err("use \"enum\" or \"oneOf\", not both".to_owned()),
                (Some(values), None) => {
                    let choices = strings(Some(values), false)?;
                    if let Some(names) = property.get("enumNames") {
                        let names = strings(Some(names), false)?;
                        if names.len() != choices.len() {
                            return Err("\"enumNames\" must name each choice once".to_owned());
                        }
                    }
                    Some(choices)
                }
                (None, Some(options)) => Some(strings(Some(options), true)?),
                (None, None) => {
                    if property.contains_key("enumNames") {
                        return Err("\"enumNames\" needs \"enum\"".to_owned());
                    }
                    None
                }
            };
            if let Some(format) = property.get("format") {
                if !matches!(
                    format.as_str(),
                    Some("email" | "uri" | "date" | "date-time")
                ) {
                    return Err("\"format\" must be one of email, uri, date, date-time".to_owned());
                }
            }
            Ok(Kind::Text {
                min: count(property, "minLength")?,
                max: count(property, "maxLength")?,
                choices,
            })
        }
        Some(kind @ ("number" | "integer")) => {
            allowed(property, &["minimum", "maximum"])?;
            Ok(Kind::Number {
                integer: kind == "integer",
                min: bound(property, "minimum")?,
                max: bound(property, "maximum")?,
            })
        }
        Some("boolean") => {
            allowed(property, &[])?;
            Ok(Kind::Boolean)
        }
        Some("array") => {
            allowed(property, &["items", "minItems", "maxItems"])?;
            let Some(items) = property.get("items").and_then(Value::as_object) else {
                return Err("an array needs \"items\" with its choices".to_owned());
            };
            let choices = if items.contains_key("anyOf") {
                if items.len() != 1 {
                    return Err("\"items\" with \"anyOf\" takes nothing else".to_owned());
                }
                strings(items.get("anyOf"), true)?
            } else {
                if items.get("type").and_then(Value::as_str) != Some("string")
                    || items.keys().any(|key| key != "type" && key != "enum")
                {
                    return Err(
                        "\"items\" must be {\"type\":\"string\",\"enum\":[...]} or {\"anyOf\":[...]}"
                            .to_owned(),
                    );
                }
                strings(items.get("enum"), false)?
            };
            Ok(Kind::Choices {
                choices,
                min: count(property, "minItems")?,
                max: count(property, "maxItems")?,
            })
        }
        _ => Err(
            "\"type\" must be string, number, integer, boolean or array (of choices)".to_owned(),
        ),
    }
}

fn check_property(property: &Value) -> Result<(), String> {
    let kind = kind(property)?;
    if let Some(default) = property.get("default") {
        check_value(&kind, default).map_err(|why| format!("its default: {why}"))?;
    }
    Ok(())
}

fn check_value(kind: &Kind<'_>, value: &Value) -> Result<(), String> {
    match kind {
        Kind::Text { min, max, choices } => {
            let Some(text) = value.as_str() else {
                return Err("must be a string".to_owned());
            };
            let length = text.chars().count() as u64;
            if min.is_some_and(|min| length < min) || max.is_some_and(|max| length > max) {
                return Err(format!("{length} characters is outside the allowed length"));
            }
            if let Some(choices) = choices {
                if !choices.contains(&text) {
                    return Err(format!("{text:?} is not one of the choices"));
                }
            }
        }
        Kind::Number { integer, min, max } => {
            let Some(number) = value.as_f64() else {
                return Err("must be a number".to_owned());
            };
            let integral = value.is_i64() || value.is_u64() || number.fract() == 0.0;
            if *integer && !integral {
                return Err("must be an integer".to_owned());
            }
            if min.is_some_and(|min| number < min) || max.is_some_and(|max| number > max) {
                return Err(format!("{number} is outside the allowed range"));
            }
        }
        Kind::Boolean => {
            if !value.is_boolean() {
                return Err("must be true or false".to_owned());
            }
        }
        Kind::Choices { choices, min, max } => {
            let Some(picked) = value.as_array() else {
                return Err("must be an array of choices".to_owned());
            };
            let count = picked.len() as u64;
            if min.is_some_and(|min| count < min) || max.is_some_and(|max| count > max) {
                return Err(format!("{count} choices is outside the allowed number"));
            }
            for (at, item) in picked.iter().enumerate() {
                match item.as_str() {
                    Some(text) if choices.contains(&text) => {
                        if picked[..at].contains(item) {
                            return Err(format!("{text:?} is chosen twice"));
                        }
                    }
                    _ => return Err(format!("{item} is not one of the choices")),
                }
            }
        }
    }
    Ok(())
}

/// Checks an accepted answer's `content` against `schema` (already checked with
/// [`check_schema`]): an object with only the schema's properties, each of its kind, and
/// every required one.
///
/// # Errors
/// What does not match, for the asking tool.
pub(crate) fn check_answer(schema: &Value, content: &Value) -> Result<(), String> {
    let Some(content) = content.as_object() else {
        return Err("the content must be a JSON object".to_owned());
    };
    let properties = schema
        .get("properties")
        .and_then(Value::as_object)
        .ok_or_else(|| "the schema has no properties".to_owned())?;
    for (name, value) in content {
        let Some(property) = properties.get(name) else {
            return Err(format!("{name:?} is not a field of the question"));
        };
        let kind = kind(property)?;
        check_value(&kind, value).map_err(|why| format!("{name:?} {why}"))?;
    }
    for name in schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        if !content.contains_key(name) {
            return Err(format!("the required field {name:?} is missing"));
        }
    }
    Ok(())
}
