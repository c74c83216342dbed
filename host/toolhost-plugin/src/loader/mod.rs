//! Loading: file → manifest → bytes → component (compiled or cached) → `InstancePre` →
//! tool definitions → registry. One plugin's failure never stops the others, and a
//! plugin's tools are registered all or none.
//!
//! Start-up cannot be held by one plugin: the `.wasm` and manifest are opened without
//! blocking and refused unless they are regular files under their size caps
//! ([`MAX_COMPONENT_BYTES`](crate::MAX_COMPONENT_BYTES), [`MAX_MANIFEST_BYTES`](crate::MAX_MANIFEST_BYTES)); the plugins of a directory are
//! compiled on one thread per core, then all asked for their definitions at once, each
//! within [`DefinitionLimits::timeout`](crate::limits::DefinitionLimits::timeout); and what they declare is held to the caps of
//! [`DefinitionLimits`](crate::limits::DefinitionLimits).
//!
//! This module holds the public entry points (`load_dir`, `load_dir_pinned`, `load_file`,
//! `reload_file`, `inspect`); each step has its own file: [`pins`] (the lock check),
//! [`compile`] (read, resolve, compile, pre-instantiate), [`definitions`] (ask for the
//! tools, all at once), [`validate`] (check what they declare) and [`register`] (all or
//! none into the registry).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use toolhost::error::ErrorChain;
use toolhost::registry::{Registry, ToolDefinition};

use super::cache::CompileSource;
use super::lock::PluginLock;
use super::manifest::Resolved;
use super::runtime::PluginRuntime;
use super::{
    LoadFailure, LoadReport, LoadedPlugin, PluginError, PluginErrorKind, PluginHost, PluginInfo,
};

mod compile;
mod definitions;
mod pins;
mod register;
mod validate;

use pins::Pins;
#[cfg(feature = "fuzzing")]
pub(crate) use validate::validate;

/// A plugin compiled, pre-instantiated and asked for its tools, not yet registered.
struct Prepared {
    /// Its prompts and resources.
    offer: compile::Offer,
    /// The name the guest knows each tool of `definitions` by (without the namespace).
    guest_names: Vec<Arc<str>>,
    /// The namespace of its tools and prompts, if any.
    namespace: Option<String>,
    name: String,
    resolved: Resolved,
    compile: CompileSource,
    runtime: Arc<PluginRuntime>,
    definitions: Vec<ToolDefinition>,
    imports: Vec<String>,
    exports: Vec<String>,
    /// The optimized compile to queue once its tools are registered, when it was loaded
    /// on quick code.
    optimize: Option<crate::optimize::OptimizeJob>,
}

impl PluginHost {
    /// Loads every `*.wasm` file in `dir`, in file-name order, into `registry`. A file
    /// that fails is reported in [`LoadReport::failed`] and the rest still load. Plugins
    /// are compiled on one thread per core, asked for their definitions all at once
    /// (each within [`DefinitionLimits::timeout`](crate::limits::DefinitionLimits::timeout), so a plugin that never answers delays
    /// the start by that deadline, not by its call timeout per plugin), and registered in
    /// file-name order. Logs one `debug` line per plugin (target `plugin`); callers
    /// report the [`LoadReport`] as they see fit (the CLI logs one line per plugin loaded
    /// or failed).
    ///
    /// When `dir` holds a lock file ([`lock`](super::lock), `plugins.lock`), every
    /// component is checked against it as [`PluginHost::load_dir_pinned`] does. A lock
    /// file that cannot be read or is invalid loads nothing: the report's only failure is
    /// that [`PluginErrorKind::Lock`].
    pub fn load_dir(&self, dir: &Path, registry: &Registry) -> LoadReport {
        match PluginLock::read(dir) {
            Ok(lock) => self.load_dir_pinned(dir, registry, lock.as_ref()),
            Err(err) => {
                let error = PluginError::from(err);
                tracing::warn!(target: "plugin", "no plugins loaded: {error}");
                LoadReport {
                    failed: vec![LoadFailure {
                        path: PluginLock::path_in(dir),
                        error,
                    }],
                    ..LoadReport::default()
                }
            }
        }
    }

    /// As [`PluginHost::load_dir`], with the lock given (read with [`PluginLock::read`];
    /// `None`: no pins). Each component's bytes are read once, hashed and checked against
    /// `lock` before anything else is done with them, then compiled from the same buffer;
    /// its manifest likewise. A component the lock does not list, or whose bytes or
    /// manifest differ from the pins, fails with [`PluginErrorKind::Unpinned`] (naming the
    /// file and both digests); the others load. An entry whose file is missing is logged.
    pub fn load_dir_pinned(
        &self,
        dir: &Path,
        registry: &Registry,
        lock: Option<&PluginLock>,
    ) -> LoadReport {
        let lock_path = PluginLock::path_in(dir);
        let pins = lock.map(|lock| Pins {
            lock,
            path: &lock_path,
        });
        let mut report = LoadReport {
            lock: lock.map(|_| lock_path.clone()),
            ..LoadReport::default()
        };
        let mut files: Vec<PathBuf> = match std::fs::read_dir(dir) {
            Ok(entries) => entries
                .filter_map(Result::ok)
                .map(|entry| entry.path())
                // Anything but a directory: a FIFO or device named `*.wasm` is reported
                // (read_regular_file refuses it without blocking), not silently skipped.
                .filter(|path| path.extension().is_some_and(|ext| ext == "wasm") && !path.is_dir())
                .collect(),
            Err(source) => {
                let error = PluginErrorKind::Io(source).at(dir.to_owned());
                tracing::warn!(target: "plugin", "no plugins loaded: {error}");
                report.failed.push(LoadFailure {
                    path: dir.to_owned(),
                    error,
                });
                return report;
            }
        };
        files.sort_by(|a, b| a.file_name().cmp(&b.file_name()));
        if let Some(lock) = lock {
            for entry in &lock.plugins {
                if !files
                    .iter()
                    .any(|path| path.file_name() == Some(entry.file.as_ref()))
                {
                    tracing::warn!(
                        target: "plugin",
                        "{} pins {}, which is not in {}",
                        lock_path.display(),
                        entry.file,
                        dir.display()
                    );
                }
            }
        }
        // A namespace for a plugin that is not here is most likely a typo in its name.
        for plugin in self.config.tool_namespaces.keys() {
            if !files
                .iter()
                .any(|path| path.file_stem().is_some_and(|stem| stem == plugin.as_str()))
            {
                tracing::warn!(
                    target: "plugin",
                    "a namespace is set for the plugin {plugin}, but {} holds no {plugin}.wasm; NAME in --plugin-namespace NAME=PREFIX is the plugin's file name",
                    dir.display()
                );
            }
        }
        let prepared = self.prepare_all(&files, pins);
        for (path, prepared) in files.into_iter().zip(prepared) {
            match prepared
                .and_then(|prepared| self.register_prepared(&path, prepared, registry, &[]))
            {
                Ok(plugin) => {
                    tracing::debug!(
                        target: "plugin",
                        plugin = %plugin.name,
                        "plugin {} loaded: tools [{}], {}, files {}",
                        plugin.name,
                        plugin.tools.join(", "),
                        plugin.compile,
                        plugin.grants
                    );
                    report.loaded.push(plugin);
                }
                Err(error) => {
                    tracing::debug!(target: "plugin", kind = error.name(), "plugin not loaded: {}", ErrorChain(&error));
                    report.failed.push(LoadFailure { path, error });
                }
            }
        }
        report
    }

    /// Loads one plugin into `registry`: its manifest, the component (compiled, or from
    /// the cache), its tool definitions (asked in a fresh instance under its limits and
    /// checked), then its tools.
    ///
    /// Registration is all or nothing ([`Registry::register_all`]): a plugin is never half
    /// registered.
    ///
    /// # Errors
    /// Any [`PluginError`]; on error, none of the plugin's tools is registered.
    pub fn load_file(&self, path: &Path, registry: &Registry) -> Result<LoadedPlugin, PluginError> {
        self.register_prepared(path, self.prepare(path)?, registry, &[])
    }

    /// Loads one plugin in place of the tools named `replacing` (hot reload: a plugin's
    /// previous version), in one step ([`Registry::replace_all`]): the registry has the
    /// old tools until the new version is compiled, asked for its tools and checked,
    /// then the new ones, never a mix. Calls already running finish on the old version.
    ///
    /// With a `lock` (the directory's [`PluginLock`], read again for each change), the new
    /// version loads only if the lock pins its bytes and manifest, as at start-up
    /// ([`PluginHost::load_dir_pinned`]): hot reload is no way around the lock.
    ///
    /// # Errors
    /// As [`PluginHost::load_file`], and [`PluginErrorKind::Unpinned`]; on error the old
    /// tools keep serving, unchanged.
    pub fn reload_file(
        &self,
        path: &Path,
        replacing: &[String],
        registry: &Registry,
        lock: Option<&PluginLock>,
    ) -> Result<LoadedPlugin, PluginError> {
        let lock_path = PluginLock::path_in(path.parent().unwrap_or(Path::new(".")));
        let pins = lock.map(|lock| Pins {
            lock,
            path: &lock_path,
        });
        let prepared = self.prepare_with(path, false, pins)?;
        self.register_prepared(path, prepared, registry, replacing)
    }

    /// Everything about a plugin without registering it: its tools, manifest, effective
    /// grant and limits, and the component's imports and exports.
    ///
    /// A grant the host would refuse is reported (`grant_allowed: false`) rather than an
    /// error, so the operator sees what the plugin asks for.
    ///
    /// # Errors
    /// As [`PluginHost::load_file`], except [`PluginErrorKind::GrantDenied`] and
    /// [`PluginErrorKind::DuplicateTool`] for a name taken in a registry.
    pub fn inspect(&self, path: &Path) -> Result<PluginInfo, PluginError> {
        let prepared = self.prepare_with(path, true, None)?;
        let manifest = prepared.resolved.manifest.as_ref();
        let resource_namespace = manifest
            .and_then(|m| m.resources.namespace.clone())
            .unwrap_or_else(|| toolhost::catalog::namespace_of(&prepared.name));
        let ask = manifest.is_some_and(|m| m.grants.ask);
        let offers_resources = prepared.offer.resources.is_some();
        Ok(PluginInfo {
            namespace: prepared.namespace,
            ask,
            ask_allowed: self.config.plugin_ask,
            sampling: manifest.and_then(|m| m.grants.sampling),
            sampling_allowed: self.config.plugin_sampling,
            tools_grant: manifest.and_then(|m| m.grants.tools_grant()),
            tools_allowed: self.config.plugin_tools.clone(),
            prompts: prepared.offer.prompts.unwrap_or_default(),
            offers_resources,
            resource_templates: prepared.offer.resources.unwrap_or_default(),
            resource_namespace,
            name: prepared.name,
            path: path.to_owned(),
            manifest: prepared.resolved.manifest_path,
            grants: prepared.resolved.files,
            grant_allowed: prepared.resolved.files <= self.config.max_file_access,
            root: prepared.resolved.root,
            http_allowed: self
                .config
                .http
                .first_denied(&prepared.resolved.http)
                .is_none(),
            http: prepared.resolved.http,
            config: prepared.resolved.config,
            limits: prepared.resolved.limits,
            tools: prepared.definitions,
            imports: prepared.imports,
            exports: prepared.exports,
            compile: prepared.compile,
        })
    }
}
