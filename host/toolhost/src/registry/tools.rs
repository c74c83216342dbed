//! The registered tools: entries in registration order, found by name and by
//! look-alike key, and the checks a batch of new tools passes before any is added.

use std::collections::HashMap;
use std::sync::Arc;

use super::{check_name, metadata, name_key, names, Handler, RegisterError, ToolDefinition};

/// A registered tool.
pub(super) struct Entry {
    pub(super) definition: ToolDefinition,
    /// The schema's top-level `required` names, read once at registration.
    pub(super) required: Vec<String>,
    pub(super) handler: Arc<dyn Handler>,
    /// Built-in tools are never replaced or removed.
    pub(super) origin: Origin,
}

#[derive(Default)]
pub(super) struct Tools {
    pub(super) entries: Vec<Arc<Entry>>,
    pub(super) by_name: HashMap<String, usize>,
    /// Entry index by [`name_key`]: one tool per key, so no two look alike.
    pub(super) by_key: HashMap<String, usize>,
}

/// Who is registering: the host's own tools may take reserved names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Origin {
    Builtin,
    Outside,
}

impl Tools {
    /// The tools of `entries`, in that order.
    pub(super) fn from_entries(entries: Vec<Arc<Entry>>) -> Self {
        let mut tools = Tools::default();
        for entry in entries {
            tools.push(entry);
        }
        tools
    }

    /// Adds one entry at the end (its name already checked).
    pub(super) fn push(&mut self, entry: Arc<Entry>) {
        let index = self.entries.len();
        self.by_name.insert(entry.definition.name.clone(), index);
        self.by_key.insert(name_key(&entry.definition.name), index);
        self.entries.push(entry);
    }
}

/// Checks every name of `tools` against `registered` and the rest of the batch, then adds
/// them all at the end; on a refusal, `registered` is left as it was.
pub(super) fn insert_batch(
    registered: &mut Tools,
    tools: Vec<(ToolDefinition, Arc<dyn Handler>)>,
    origin: Origin,
) -> Result<(), RegisterError> {
    // The batch's names so far, by key.
    let mut batch: HashMap<String, &str> = HashMap::new();
    for (definition, _) in &tools {
        let name = definition.name.as_str();
        check_name(name)?;
        let key = name_key(name);
        if origin == Origin::Outside {
            if let Some(builtin) = names::reserved_for(&key) {
                return Err(RegisterError::Reserved {
                    name: name.to_owned(),
                    builtin: builtin.to_owned(),
                });
            }
        }
        let existing = registered
            .by_key
            .get(&key)
            .map(|&index| registered.entries[index].definition.name.as_str())
            .or_else(|| batch.get(&key).copied());
        match existing {
            Some(existing) if existing == name => {
                return Err(RegisterError::DuplicateTool {
                    name: name.to_owned(),
                })
            }
            Some(existing) => {
                return Err(RegisterError::LookAlike {
                    name: name.to_owned(),
                    existing: existing.to_owned(),
                })
            }
            None => {
                batch.insert(key, name);
            }
        }
    }
    // Titles and output schemas, once every name is known to be free.
    for (index, (definition, _)) in tools.iter().enumerate() {
        let registered_ones = registered.entries.iter().map(|entry| &entry.definition);
        let others = registered_ones
            .chain(tools[..index].iter().map(|(earlier, _)| earlier))
            .map(|other| (other.name.as_str(), other.title.as_deref()));
        metadata::check(definition, origin == Origin::Outside, others)?;
    }
    for (definition, handler) in tools {
        let required = toolhost_sdk::schema::required_fields(&definition.parameters);
        registered.push(Arc::new(Entry {
            definition,
            required,
            handler,
            origin,
        }));
    }
    Ok(())
}
