//! The serde deserializer over the arguments' JSON value that knows each value's path
//! (objects, arrays, enums), so every error it passes on names the argument.

use super::error::Path;
use super::words::{cut, got_value, quoted_list};
use super::{ArgumentError, Problem};
use serde::de::value::BorrowedStrDeserializer;
use serde::de::{
    self, DeserializeSeed, EnumAccess, IntoDeserializer, MapAccess, SeqAccess, VariantAccess,
    Visitor,
};
use serde_json::Value;

/// A serde deserializer over one argument value that knows its path, so every error it
/// passes on names the argument.
pub(super) struct Reader<'de, 'p> {
    pub(super) value: &'de Value,
    pub(super) path: &'p Path<'p>,
}

impl Reader<'_, '_> {
    fn wrong_type(&self, expected: &str) -> ArgumentError {
        ArgumentError::new(Problem::WrongType {
            expected: expected.to_owned(),
            got: got_value(self.value),
        })
    }
}

impl<'de> de::Deserializer<'de> for Reader<'de, '_> {
    type Error = ArgumentError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ArgumentError> {
        let path = self.path;
        let result: Result<V::Value, ArgumentError> = match self.value {
            Value::Null => visitor.visit_unit(),
            Value::Bool(b) => visitor.visit_bool(*b),
            Value::Number(n) => {
                if let Some(u) = n.as_u64() {
                    visitor.visit_u64(u)
                } else if let Some(i) = n.as_i64() {
                    visitor.visit_i64(i)
                } else {
                    visitor.visit_f64(n.as_f64().unwrap_or(f64::NAN))
                }
            }
            Value::String(s) => visitor.visit_borrowed_str(s),
            Value::Array(items) => {
                let mut seq = Elements {
                    items: items.iter(),
                    index: 0,
                    path,
                };
                let value = visitor.visit_seq(&mut seq)?;
                if seq.items.len() > 0 {
                    return Err(ArgumentError::new(Problem::WrongLength {
                        expected: format!("an array of {} elements", seq.index),
                        got: items.len(),
                    })
                    .at(path));
                }
                Ok(value)
            }
            Value::Object(fields) => {
                let mut map = Fields {
                    fields: fields.iter(),
                    pending: None,
                    path,
                };
                let value = visitor.visit_map(&mut map)?;
                if map.fields.len() > 0 {
                    return Err(ArgumentError::new(Problem::WrongLength {
                        expected: "an object with fewer fields".to_owned(),
                        got: fields.len(),
                    })
                    .at(path));
                }
                Ok(value)
            }
        };
        result.map_err(|err| err.at(path))
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ArgumentError> {
        match self.value {
            Value::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, ArgumentError> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, ArgumentError> {
        let variant = match self.value {
            Value::String(variant) => Some((variant.as_str(), None)),
            Value::Object(fields) if fields.len() == 1 => fields
                .iter()
                .next()
                .map(|(variant, value)| (variant.as_str(), Some(value))),
            _ => None,
        };
        let Some((variant, value)) = variant else {
            let expected = if variants.is_empty() {
                "a string".to_owned()
            } else {
                format!("one of {}", quoted_list(variants))
            };
            return Err(self.wrong_type(&expected).at(self.path));
        };
        visitor
            .visit_enum(Variant {
                variant,
                value,
                path: self.path,
            })
            .map_err(|err| err.at(self.path))
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(
        self,
        visitor: V,
    ) -> Result<V::Value, ArgumentError> {
        visitor.visit_unit()
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf unit unit_struct seq tuple tuple_struct map struct identifier
    }
}

/// The elements of an array, each read at `path[index]`.
struct Elements<'de, 'p> {
    items: std::slice::Iter<'de, Value>,
    index: usize,
    path: &'p Path<'p>,
}

impl<'de> SeqAccess<'de> for Elements<'de, '_> {
    type Error = ArgumentError;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, ArgumentError> {
        let Some(value) = self.items.next() else {
            return Ok(None);
        };
        let path = Path::Index(self.path, self.index);
        self.index += 1;
        seed.deserialize(Reader { value, path: &path })
            .map(Some)
            .map_err(|err| err.at(&path))
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.items.len())
    }
}

/// The fields of an object, each value read at `path.key`.
struct Fields<'de, 'p> {
    fields: serde_json::map::Iter<'de>,
    pending: Option<(&'de str, &'de Value)>,
    path: &'p Path<'p>,
}

impl<'de> MapAccess<'de> for Fields<'de, '_> {
    type Error = ArgumentError;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, ArgumentError> {
        let Some((key, value)) = self.fields.next() else {
            return Ok(None);
        };
        self.pending = Some((key, value));
        let path = Path::Field(self.path, key);
        seed.deserialize(BorrowedStrDeserializer::<ArgumentError>::new(key))
            .map(Some)
            .map_err(|err| err.at(&path))
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(
        &mut self,
        seed: V,
    ) -> Result<V::Value, ArgumentError> {
        let Some((key, value)) = self.pending.take() else {
            return Err(ArgumentError::new(Problem::Other {
                message: "a value was asked for before its key (a bug in the type's Deserialize)"
                    .to_owned(),
            })
            .at(self.path));
        };
        let path = Path::Field(self.path, key);
        seed.deserialize(Reader { value, path: &path })
            .map_err(|err| err.at(&path))
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.fields.len())
    }
}

/// An enum value: a variant name, with its content for a variant that has one
/// (`{"circle": {"r": 1}}`).
struct Variant<'de, 'p> {
    variant: &'de str,
    value: Option<&'de Value>,
    path: &'p Path<'p>,
}

impl<'de, 'p> EnumAccess<'de> for Variant<'de, 'p> {
    type Error = ArgumentError;
    type Variant = Self;

    fn variant_seed<V: DeserializeSeed<'de>>(
        self,
        seed: V,
    ) -> Result<(V::Value, Self), ArgumentError> {
        let name = seed
            .deserialize(self.variant.into_deserializer())
            .map_err(|err: ArgumentError| err.at(self.path))?;
        Ok((name, self))
    }
}

impl<'de> VariantAccess<'de> for Variant<'de, '_> {
    type Error = ArgumentError;

    fn unit_variant(self) -> Result<(), ArgumentError> {
        match self.value {
            None | Some(Value::Null) => Ok(()),
            Some(value) => Err(ArgumentError::new(Problem::WrongType {
                expected: format!("the string \"{}\" alone", cut(self.variant)),
                got: format!("an object with content {}", got_value(value)),
            })
            .at(self.path)),
        }
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(
        self,
        seed: T,
    ) -> Result<T::Value, ArgumentError> {
        let path = Path::Field(self.path, self.variant);
        match self.value {
            Some(value) => seed
                .deserialize(Reader { value, path: &path })
                .map_err(|err| err.at(&path)),
            None => Err(missing_content(self.variant).at(self.path)),
        }
    }

    fn tuple_variant<V: Visitor<'de>>(
        self,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, ArgumentError> {
        let path = Path::Field(self.path, self.variant);
        match self.value {
            Some(value) => {
                de::Deserializer::deserialize_seq(Reader { value, path: &path }, visitor)
                    .map_err(|err| err.at(&path))
            }
            None => Err(missing_content(self.variant).at(self.path)),
        }
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, ArgumentError> {
        let path = Path::Field(self.path, self.variant);
        match self.value {
            Some(value) => {
                de::Deserializer::deserialize_map(Reader { value, path: &path }, visitor)
                    .map_err(|err| err.at(&path))
            }
            None => Err(missing_content(self.variant).at(self.path)),
        }
    }
}

/// A variant that needs content was given as a bare string.
fn missing_content(variant: &str) -> ArgumentError {
    let variant = cut(variant);
    ArgumentError::new(Problem::WrongType {
        expected: format!("an object {{\"{variant}\": ...}} with the variant's content"),
        got: format!("string \"{variant}\""),
    })
}
