//! The [`Catalog`]: sources by owner, swapped and removed in one step.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use super::{
    namespace_of, Entries, PromptDefinition, PromptSource, ResourceSource, ResourceTemplate,
    Shared, Sources,
};
use crate::registry::{check_name, name_key};

/// Prompt and resource sources by owner. `Send + Sync`; changes raise its generation
/// and wake [`Catalog::changes`] (an MCP server then tells clients the list changed).
pub struct Catalog {
    entries: Shared,
    changes: tokio::sync::watch::Sender<u64>,
}

/// Why a source was not registered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CatalogError {
    /// Another owner already offers a prompt of this name (or one that differs only in
    /// case, `-` or `_`).
    #[error("prompt \"{name}\" is already offered by {other}; rename one of them")]
    DuplicatePrompt {
        /// The prompt's name.
        name: String,
        /// Who offers it already.
        other: String,
    },
    /// A prompt name breaks the tool name rules.
    #[error("prompt \"{name}\": {problem}")]
    BadPromptName {
        /// The name.
        name: String,
        /// What is wrong with it.
        problem: String,
    },
    /// A resource template is not under the owner's namespace.
    #[error("resource template \"{template}\" of {owner} is outside its namespace {namespace}; every URI it offers must start with it")]
    OutsideNamespace {
        /// The owner.
        owner: String,
        /// The template.
        template: String,
        /// The namespace it must start with.
        namespace: String,
    },
}

impl Default for Catalog {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Catalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let owners: Vec<String> = self.read().owners.iter().map(|s| s.owner.clone()).collect();
        f.debug_struct("Catalog").field("owners", &owners).finish()
    }
}

impl Catalog {
    /// An empty catalog.
    pub fn new() -> Self {
        Self {
            entries: RwLock::new(Entries::default()),
            changes: tokio::sync::watch::Sender::new(0),
        }
    }

    /// How many times the catalog has changed.
    pub fn generation(&self) -> u64 {
        *self.changes.borrow()
    }

    /// A receiver woken on every change, holding the new generation.
    pub fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// Gives `owner` these sources, in place of what it had (`None`: none of that kind).
    ///
    /// # Errors
    /// [`CatalogError`] when a prompt name is bad or taken by another owner, or a
    /// template leaves `plugin://<owner>/`. On error nothing changes.
    pub fn replace(
        &self,
        owner: &str,
        prompts: Option<Arc<dyn PromptSource>>,
        resources: Option<Arc<dyn ResourceSource>>,
    ) -> Result<(), CatalogError> {
        let prompts = prompts.map(|source| {
            let definitions = source.definitions();
            (source, definitions)
        });
        let resources = resources.map(|source| {
            let templates = source.templates();
            (source, templates)
        });
        let namespace = namespace_of(owner);
        if let Some((_, templates)) = &resources {
            if let Some(bad) = templates
                .iter()
                .find(|t| !t.uri_template.starts_with(&namespace))
            {
                return Err(CatalogError::OutsideNamespace {
                    owner: owner.to_owned(),
                    template: bad.uri_template.clone(),
                    namespace,
                });
            }
        }
        let mut entries = self.write();
        if let Some((_, definitions)) = &prompts {
            check_prompt_names(&entries, owner, definitions)?;
        }
        entries.owners.retain(|sources| sources.owner != owner);
        if prompts.is_some() || resources.is_some() {
            entries.owners.push(Sources {
                owner: owner.to_owned(),
                prompts,
                resources,
            });
        }
        drop(entries);
        self.changes.send_modify(|generation| *generation += 1);
        Ok(())
    }

    /// Takes away everything `owner` registered; `false` when it had nothing.
    pub fn remove(&self, owner: &str) -> bool {
        let mut entries = self.write();
        let before = entries.owners.len();
        entries.owners.retain(|sources| sources.owner != owner);
        let removed = entries.owners.len() != before;
        drop(entries);
        if removed {
            self.changes.send_modify(|generation| *generation += 1);
        }
        removed
    }

    /// Every prompt, by owner in registration order.
    pub fn prompts(&self) -> Vec<PromptDefinition> {
        self.read()
            .owners
            .iter()
            .filter_map(|sources| sources.prompts.as_ref())
            .flat_map(|(_, definitions)| definitions.iter().cloned())
            .collect()
    }

    /// Prompt `name` and its source.
    pub fn prompt(&self, name: &str) -> Option<(PromptDefinition, Arc<dyn PromptSource>)> {
        self.read().owners.iter().find_map(|sources| {
            let (source, definitions) = sources.prompts.as_ref()?;
            let definition = definitions.iter().find(|d| d.name == name)?;
            Some((definition.clone(), Arc::clone(source)))
        })
    }

    /// Every resource source with its namespace, by owner in registration order.
    pub fn resource_sources(&self) -> Vec<(String, Arc<dyn ResourceSource>)> {
        self.read()
            .owners
            .iter()
            .filter_map(|sources| {
                let (source, _) = sources.resources.as_ref()?;
                Some((namespace_of(&sources.owner), Arc::clone(source)))
            })
            .collect()
    }

    /// Every resource template.
    pub fn resource_templates(&self) -> Vec<ResourceTemplate> {
        self.read()
            .owners
            .iter()
            .filter_map(|sources| sources.resources.as_ref())
            .flat_map(|(_, templates)| templates.iter().cloned())
            .collect()
    }

    /// The source whose namespace `uri` is under, if any.
    pub fn resource_source_for(&self, uri: &str) -> Option<Arc<dyn ResourceSource>> {
        self.read().owners.iter().find_map(|sources| {
            let (source, _) = sources.resources.as_ref()?;
            uri.starts_with(&namespace_of(&sources.owner))
                .then(|| Arc::clone(source))
        })
    }

    fn read(&self) -> RwLockReadGuard<'_, Entries> {
        self.entries
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn write(&self) -> RwLockWriteGuard<'_, Entries> {
        self.entries
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Checks `definitions` (of `owner`) against the rules and every other owner's prompts.
fn check_prompt_names(
    entries: &Entries,
    owner: &str,
    definitions: &[PromptDefinition],
) -> Result<(), CatalogError> {
    let mut taken: BTreeMap<String, String> = BTreeMap::new();
    for sources in entries.owners.iter().filter(|s| s.owner != owner) {
        for definition in sources.prompts.iter().flat_map(|(_, d)| d) {
            taken.insert(name_key(&definition.name), sources.owner.clone());
        }
    }
    for definition in definitions {
        check_name(&definition.name).map_err(|err| CatalogError::BadPromptName {
            name: definition.name.clone(),
            problem: err.to_string(),
        })?;
        let key = name_key(&definition.name);
        if let Some(other) = taken.get(&key) {
            return Err(CatalogError::DuplicatePrompt {
                name: definition.name.clone(),
                other: other.clone(),
            });
        }
        taken.insert(key, owner.to_owned());
    }
    Ok(())
}
