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
    /// A resource namespace is not a URI prefix (`scheme://...`), is the host's own
    /// `file:` scheme, or overlaps another owner's namespace.
    #[error("resource namespace \"{namespace}\" of {owner}: {problem}")]
    BadNamespace {
        /// The owner.
        owner: String,
        /// The namespace asked for.
        namespace: String,
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
    /// Its resources live under `namespace` (a URI prefix such as `plugin://weather/`;
    /// `None`: [`namespace_of`] the owner), which no other owner's may overlap.
    ///
    /// # Errors
    /// [`CatalogError`] when a prompt name is bad or taken by another owner, the
    /// namespace is not a `scheme://` prefix, is `file:` (the host's own files) or
    /// overlaps another owner's, or a template leaves the namespace. On error nothing
    /// changes.
    pub fn replace(
        &self,
        owner: &str,
        prompts: Option<Arc<dyn PromptSource>>,
        resources: Option<Arc<dyn ResourceSource>>,
        namespace: Option<&str>,
    ) -> Result<(), CatalogError> {
        let prompts = prompts.map(|source| {
            let definitions = source.definitions();
            (source, definitions)
        });
        let resources = resources.map(|source| {
            let templates = source.templates();
            (source, templates)
        });
        let namespace = namespace.map_or_else(|| namespace_of(owner), str::to_owned);
        let bad_namespace = |problem: &str| CatalogError::BadNamespace {
            owner: owner.to_owned(),
            namespace: namespace.clone(),
            problem: problem.to_owned(),
        };
        if resources.is_some() {
            check_namespace(&namespace).map_err(&bad_namespace)?;
        }
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
        if resources.is_some() {
            let overlapping = entries.owners.iter().find(|other| {
                other.owner != owner
                    && other.resources.is_some()
                    && (other.namespace.starts_with(&namespace)
                        || namespace.starts_with(&other.namespace))
            });
            if let Some(other) = overlapping {
                return Err(bad_namespace(&format!(
                    "it overlaps {}'s namespace \"{}\"; give one of them another prefix",
                    other.owner, other.namespace
                )));
            }
        }
        entries.owners.retain(|sources| sources.owner != owner);
        if prompts.is_some() || resources.is_some() {
            entries.owners.push(Sources {
                owner: owner.to_owned(),
                namespace,
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
                Some((sources.namespace.clone(), Arc::clone(source)))
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
            uri.starts_with(&sources.namespace)
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

/// Why `namespace` cannot be a resource namespace, if it cannot.
fn check_namespace(namespace: &str) -> Result<(), &'static str> {
    let Some((scheme, rest)) = namespace.split_once("://") else {
        return Err("a namespace is a URI prefix such as \"plugin://weather/\"");
    };
    let scheme_ok = scheme
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    if !scheme_ok {
        return Err("its scheme must be letters, digits, '+', '-' or '.', starting with a letter");
    }
    if scheme.eq_ignore_ascii_case("file") {
        return Err("file:// is the host's own files; use another scheme");
    }
    if namespace.len() > 256 || rest.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err("it must be at most 256 characters, without spaces or control characters");
    }
    Ok(())
}
