//! [`Params`]: a message's params object, each member kept as the client's JSON text.

use std::collections::BTreeMap;

use serde_json::value::RawValue;
use serde_json::Value;

/// A message's params object, each member kept as the JSON text the client sent, read into
/// a value only where the server needs one.
#[derive(Clone, Default)]
pub(crate) struct Params(BTreeMap<String, Box<RawValue>>);

impl Params {
    /// Params from the JSON text of an object: `None` for anything else.
    pub(crate) fn parse(json: &str) -> Option<Self> {
        serde_json::from_str(json).ok().map(Self)
    }

    /// A member's JSON text, as sent (`null` included).
    pub(crate) fn raw(&self, name: &str) -> Option<&RawValue> {
        self.0.get(name).map(AsRef::as_ref)
    }

    /// A member read as a value; `None` when absent, or when it cannot be one (a number
    /// beyond `f64`, nesting deeper than serde_json's 128 levels).
    pub(crate) fn value(&self, name: &str) -> Option<Value> {
        serde_json::from_str(self.raw(name)?.get()).ok()
    }

    /// A member that is a JSON string, decoded.
    pub(crate) fn str(&self, name: &str) -> Option<String> {
        serde_json::from_str(self.raw(name)?.get()).ok()
    }

    /// How many members there are.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }
}

impl PartialEq for Params {
    fn eq(&self, other: &Self) -> bool {
        self.0.len() == other.0.len()
            && self
                .0
                .iter()
                .zip(&other.0)
                .all(|((a, x), (b, y))| a == b && x.get() == y.get())
    }
}

impl std::fmt::Debug for Params {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map()
            .entries(self.0.iter().map(|(name, raw)| (name, raw.get())))
            .finish()
    }
}
