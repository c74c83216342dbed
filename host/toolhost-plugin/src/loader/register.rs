//! Registering a prepared plugin's tools, all or none (in place of its previous version's
//! on hot reload), and naming who already holds a tool name that is taken.

use std::path::Path;
use std::sync::Arc;

use toolhost::registry::{Handler, RegisterError, Registry};

use toolhost::catalog::{PromptSource, ResourceSource};

use super::compile::Offer;
use super::Prepared;
use crate::runtime::PluginTool;
use crate::sources::{PluginPrompts, PluginResources};
use crate::{LoadedPlugin, PluginError, PluginErrorKind, PluginHost};

impl PluginHost {
    /// Registers a prepared plugin's tools, all or none, in place of the tools named
    /// `replacing` (none for a first load).
    pub(super) fn register_prepared(
        &self,
        path: &Path,
        prepared: Prepared,
        registry: &Registry,
        replacing: &[String],
    ) -> Result<LoadedPlugin, PluginError> {
        for definition in &prepared.definitions {
            if registry.has(&definition.name) && !replacing.contains(&definition.name) {
                return Err(self.taken(path, &definition.name));
            }
        }
        // Its prompts and resources first: a prompt name taken by another plugin, or a
        // namespace refused, fails the load before any tool changes.
        Self::offer(path, &prepared, registry)?;
        let tools: Vec<String> = prepared
            .definitions
            .iter()
            .map(|d| d.name.clone())
            .collect();
        // The guest knows its tools by their own names, without the namespace.
        let batch = prepared
            .definitions
            .into_iter()
            .zip(prepared.guest_names)
            .map(|(definition, tool)| {
                let handler: Arc<dyn Handler> = Arc::new(PluginTool {
                    runtime: Arc::clone(&prepared.runtime),
                    tool,
                });
                (definition, handler)
            })
            .collect();
        let namespace = prepared.namespace.clone();
        let namespace = namespace.as_deref();
        let registered = registry.replace_all(replacing, batch);
        if registered.is_err() && replacing.is_empty() {
            // A first load whose tools were refused offers nothing either.
            registry.catalog().remove(&prepared.name);
        }
        registered.map_err(|err| match err {
            // Registered by someone else since the check above.
            RegisterError::DuplicateTool { name } => self.taken(path, &name),
            RegisterError::LookAlike { name, existing } => PluginErrorKind::DuplicateTool { name, taken_by: format!("it looks like the registered tool \"{existing}\" (tool names are compared ignoring case, - and _)") }.at(path.to_owned()),
            // Reserved for a built-in, or not a valid name.
            other @ RegisterError::Reserved { .. } => {
                let reason = match namespace {
                    Some(namespace) => format!("{other} (the namespace \"{namespace}\" made this name: choose another namespace)"),
                    None => format!("{other}, or give the plugin a namespace (`namespace = \"PREFIX\"` at the top of its manifest, or --plugin-namespace NAME=PREFIX) so it is offered as PREFIX_NAME"),
                };
                PluginErrorKind::BadDefinition { tool: other.name().unwrap_or_default().to_owned(), reason }.at(path.to_owned())
            }
            other => PluginErrorKind::BadDefinition { tool: other.name().unwrap_or_default().to_owned(), reason: other.to_string() }.at(path.to_owned()),
        })?;
        if let Ok(mut owners) = self.owners.lock() {
            for old in replacing {
                owners.remove(old);
            }
            for tool in &tools {
                owners.insert(tool.clone(), path.to_owned());
            }
        }
        if let Some(job) = prepared.optimize {
            self.optimizer.submit(job);
        }
        Ok(LoadedPlugin {
            namespace: prepared.namespace,
            name: prepared.name,
            path: path.to_owned(),
            tools,
            compile: prepared.compile,
            grants: prepared.resolved.files,
            root: prepared.resolved.root,
            manifest: prepared.resolved.manifest_path,
            limits: prepared.resolved.limits,
            http: prepared.resolved.http,
            config: prepared.resolved.config,
        })
    }

    /// Registers (or, on reload, replaces or removes) the plugin's prompt and resource
    /// sources in `registry`'s catalog, under its name.
    fn offer(path: &Path, prepared: &Prepared, registry: &Registry) -> Result<(), PluginError> {
        let Offer { prompts, resources } = &prepared.offer;
        let prompts = prompts.as_ref().map(|definitions| {
            Arc::new(PluginPrompts {
                runtime: Arc::clone(&prepared.runtime),
                namespace: prepared.namespace.clone(),
                definitions: definitions.clone(),
            }) as Arc<dyn PromptSource>
        });
        let namespace = prepared
            .resolved
            .manifest
            .as_ref()
            .and_then(|m| m.resources.namespace.clone())
            .unwrap_or_else(|| toolhost::catalog::namespace_of(&prepared.name));
        let resources = resources.as_ref().map(|templates| {
            Arc::new(PluginResources {
                runtime: Arc::clone(&prepared.runtime),
                namespace: namespace.clone(),
                templates: templates.clone(),
            }) as Arc<dyn ResourceSource>
        });
        registry
            .catalog()
            .replace(&prepared.name, prompts, resources, Some(&namespace))
            .map_err(|err| {
                PluginErrorKind::Catalog {
                    message: err.to_string(),
                }
                .at(path.to_owned())
            })
    }

    /// `name` is taken in the registry: by a plugin this host loaded (named by its file),
    /// or by a tool registered otherwise (a built-in, the embedding program's own).
    fn taken(&self, path: &Path, name: &str) -> PluginError {
        let owner = self
            .owners
            .lock()
            .ok()
            .and_then(|owners| owners.get(name).cloned());
        let taken_by = match owner {
            Some(other) => format!("the plugin {} already declares it", other.display()),
            None => "a tool of that name is already registered (not by a plugin)".into(),
        };
        PluginErrorKind::DuplicateTool {
            name: name.to_owned(),
            taken_by,
        }
        .at(path.to_owned())
    }
}
