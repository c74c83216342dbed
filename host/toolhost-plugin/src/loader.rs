//! Loading: file → manifest → bytes → component (compiled or cached) → `InstancePre` →
//! tool definitions → registry. One plugin's failure never stops the others, and a
//! plugin's tools are registered all or none.

use std::collections::HashSet;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;

use toolhost::registry::{check_name, Handler, RegisterError, Registry, ToolDefinition, ToolError};

use super::bindings::PluginPre;
use super::error::error_chain;
use super::host::files::FileGrant;
use super::manifest::{self, Resolved};
use super::runtime::{PluginRuntime, PluginTool};
use super::{
    CompileSource, LoadFailure, LoadReport, LoadedPlugin, PluginError, PluginHost, PluginInfo,
};

/// A plugin compiled, pre-instantiated and asked for its tools, not yet registered.
struct Prepared {
    name: String,
    resolved: Resolved,
    compile: CompileSource,
    runtime: Arc<PluginRuntime>,
    definitions: Vec<ToolDefinition>,
    imports: Vec<String>,
    exports: Vec<String>,
}

impl PluginHost {
    /// Loads every `*.wasm` file in `dir`, in file-name order, into `registry`. A file
    /// that fails is reported in [`LoadReport::failed`] and the rest still load. Plugins
    /// are compiled on one thread per core and registered in file-name order. Logs one
    /// `debug` line per plugin (target `plugin`); callers report the [`LoadReport`] as
    /// they see fit (the CLI logs one line per plugin loaded or failed).
    pub fn load_dir(&self, dir: &Path, registry: &Registry) -> LoadReport {
        let mut report = LoadReport::default();
        let mut files: Vec<PathBuf> = match std::fs::read_dir(dir) {
            Ok(entries) => entries
                .filter_map(Result::ok)
                .map(|entry| entry.path())
                .filter(|path| path.extension().is_some_and(|ext| ext == "wasm") && path.is_file())
                .collect(),
            Err(source) => {
                let error = PluginError::Io {
                    path: dir.to_owned(),
                    source,
                };
                tracing::warn!(target: "plugin", "no plugins loaded: {error}");
                report.failed.push(LoadFailure {
                    path: dir.to_owned(),
                    error,
                });
                return report;
            }
        };
        files.sort_by(|a, b| a.file_name().cmp(&b.file_name()));
        let prepared = self.prepare_all(&files);
        for (path, prepared) in files.into_iter().zip(prepared) {
            match prepared.and_then(|prepared| self.register_prepared(&path, prepared, registry)) {
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
                    tracing::debug!(target: "plugin", kind = error.kind(), "plugin not loaded: {error}");
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
        self.register_prepared(path, self.prepare(path)?, registry)
    }

    /// Prepares every file of `files` (manifest, compile or cache, definitions) on up to
    /// one thread per core, keeping the order: compiling is the slow part of a cold start.
    fn prepare_all(&self, files: &[PathBuf]) -> Vec<Result<Prepared, PluginError>> {
        let threads = std::thread::available_parallelism()
            .map_or(1, usize::from)
            .clamp(1, files.len().max(1));
        let per_thread = files.len().div_ceil(threads).max(1);
        std::thread::scope(|scope| {
            let workers: Vec<_> = files
                .chunks(per_thread)
                .map(|chunk| {
                    scope.spawn(move || {
                        chunk
                            .iter()
                            .map(|path| self.prepare(path))
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            workers
                .into_iter()
                .zip(files.chunks(per_thread))
                .flat_map(|(worker, chunk)| {
                    worker.join().unwrap_or_else(|_| {
                        chunk
                            .iter()
                            .map(|path| {
                                Err(PluginError::Host {
                                    message: format!(
                                        "loading {} crashed the loader thread",
                                        path.display()
                                    ),
                                })
                            })
                            .collect()
                    })
                })
                .collect()
        })
    }

    /// Registers a prepared plugin's tools, all or none.
    fn register_prepared(
        &self,
        path: &Path,
        prepared: Prepared,
        registry: &Registry,
    ) -> Result<LoadedPlugin, PluginError> {
        for definition in &prepared.definitions {
            if registry.has(&definition.name) {
                return Err(taken(path, &definition.name));
            }
        }
        let tools: Vec<String> = prepared
            .definitions
            .iter()
            .map(|d| d.name.clone())
            .collect();
        let batch = prepared
            .definitions
            .into_iter()
            .map(|definition| {
                let handler: Arc<dyn Handler> = Arc::new(PluginTool {
                    runtime: Arc::clone(&prepared.runtime),
                    tool: Arc::from(definition.name.as_str()),
                });
                (definition, handler)
            })
            .collect();
        registry.register_all(batch).map_err(|err| match err {
            // Registered by someone else since the check above.
            RegisterError::DuplicateTool { name } => taken(path, &name),
            RegisterError::LookAlike { name, existing } => PluginError::DuplicateTool {
                path: path.to_owned(),
                name,
                taken_by: format!("it looks like the registered tool \"{existing}\" (tool names are compared ignoring case, - and _)"),
            },
            // Reserved for a built-in, or not a valid name.
            other => PluginError::BadDefinition {
                path: path.to_owned(),
                tool: other.name().unwrap_or_default().to_owned(),
                reason: other.to_string(),
            },
        })?;
        Ok(LoadedPlugin {
            name: prepared.name,
            path: path.to_owned(),
            tools,
            compile: prepared.compile,
            grants: prepared.resolved.files,
            root: prepared.resolved.root,
            manifest: prepared.resolved.manifest_path,
            limits: prepared.resolved.limits,
        })
    }

    /// Everything about a plugin without registering it: its tools, manifest, effective
    /// grant and limits, and the component's imports and exports.
    ///
    /// A grant the host would refuse is reported (`grant_allowed: false`) rather than an
    /// error, so the operator sees what the plugin asks for.
    ///
    /// # Errors
    /// As [`PluginHost::load_file`], except [`PluginError::GrantDenied`] and
    /// [`PluginError::DuplicateTool`] for a name taken in a registry.
    pub fn inspect(&self, path: &Path) -> Result<PluginInfo, PluginError> {
        let prepared = self.prepare_with(path, true)?;
        Ok(PluginInfo {
            name: prepared.name,
            path: path.to_owned(),
            manifest: prepared.resolved.manifest_path,
            grants: prepared.resolved.files,
            grant_allowed: prepared.resolved.files <= self.config.max_file_access,
            root: prepared.resolved.root,
            limits: prepared.resolved.limits,
            tools: prepared.definitions,
            imports: prepared.imports,
            exports: prepared.exports,
            compile: prepared.compile,
        })
    }

    fn prepare(&self, path: &Path) -> Result<Prepared, PluginError> {
        self.prepare_with(path, false)
    }

    fn prepare_with(&self, path: &Path, any_grant: bool) -> Result<Prepared, PluginError> {
        let name = path
            .file_stem()
            .and_then(|stem| stem.to_str())
            .ok_or_else(|| PluginError::NotAComponent {
                path: path.to_owned(),
                reason: "the file name is not valid UTF-8; rename it".into(),
            })?
            .to_owned();
        let resolved = if any_grant {
            let mut config = self.config.clone();
            config.max_file_access = super::FileAccess::ReadWrite;
            manifest::resolve(path, &config)?
        } else {
            manifest::resolve(path, &self.config)?
        };
        let bytes = std::fs::read(path).map_err(|source| PluginError::Io {
            path: path.to_owned(),
            source,
        })?;
        check_header(path, &bytes)?;
        let (component, compile) = self.cache.load(&self.engine, path, &bytes)?;
        let wrong_world = |err: wasmtime::Error| PluginError::WrongWorld {
            path: path.to_owned(),
            message: error_chain(&err),
        };
        let instance_pre = self
            .linker
            .instantiate_pre(&component)
            .map_err(wrong_world)?;
        let pre = PluginPre::new(instance_pre).map_err(wrong_world)?;

        let files = FileGrant::new(
            &name,
            resolved.files,
            self.config.storage.clone(),
            resolved.root.as_deref(),
            self.config.file_policy.clone(),
        )
        .map_err(|err| PluginError::Manifest {
            path: manifest::manifest_path(path),
            message: format!("grants.root: {err}"),
        })?;
        let runtime = Arc::new(PluginRuntime::new(
            Arc::from(name.as_str()),
            pre,
            resolved.limits.clone(),
            Arc::new(files),
            Arc::clone(&self.shared),
        ));
        let raw = block_on(runtime.definitions())
            .map_err(|err| PluginError::Host {
                message: format!(
                    "cannot start a tokio runtime to load {}: {err}",
                    path.display()
                ),
            })?
            .map_err(|err| PluginError::Definitions {
                path: path.to_owned(),
                message: definitions_failure(err),
            })?;
        let definitions = validate(path, raw)?;

        let component_type = component.component_type();
        let imports = component_type
            .imports(&self.engine)
            .map(|(name, _)| name.to_owned())
            .collect();
        let exports = component_type
            .exports(&self.engine)
            .map(|(name, _)| name.to_owned())
            .collect();
        Ok(Prepared {
            name,
            resolved,
            compile,
            runtime,
            definitions,
            imports,
            exports,
        })
    }
}

fn taken(path: &Path, name: &str) -> PluginError {
    PluginError::DuplicateTool {
        path: path.to_owned(),
        name: name.to_owned(),
        taken_by: "a tool of that name is already registered".into(),
    }
}

/// What went wrong asking for the definitions, for the operator (the [`ToolError`]
/// texts are written for a model and name a tool).
fn definitions_failure(err: ToolError) -> String {
    match err {
        ToolError::ToolPanicked { message, .. } => format!("it crashed: {message}"),
        ToolError::TimedOut { limit, .. } => format!(
            "it did not answer within {} (its timeout)",
            super::limits::format_duration(limit)
        ),
        ToolError::LimitExceeded { limit, message, .. } => {
            format!("it hit its {limit} limit: {message}")
        }
        other => other.to_string(),
    }
}

/// Checks the WebAssembly header: a component, not a core module or something else.
fn check_header(path: &Path, bytes: &[u8]) -> Result<(), PluginError> {
    let not = |reason: &str| PluginError::NotAComponent {
        path: path.to_owned(),
        reason: reason.to_owned(),
    };
    if bytes.len() < 8 || &bytes[..4] != b"\0asm" {
        return Err(not("the file does not start with the WebAssembly magic bytes (\\0asm); is it a .wasm file?"));
    }
    match bytes[6..8] {
        [1, 0] => Ok(()),
        [0, 0] => Err(not("it is a core WebAssembly module; build the plugin for the wasm32-wasip2 target (cargo build --target wasm32-wasip2 --release), which makes a component")),
        _ => Err(not("its header declares an unknown WebAssembly layer; build it with a current toolchain for wasm32-wasip2")),
    }
}

/// The plugin's definitions as registry definitions, checked: valid unique names,
/// parameters a JSON object schema, at least one tool.
fn validate(
    path: &Path,
    raw: Vec<super::bindings::exports::toolhost::plugin::tools::ToolDefinition>,
) -> Result<Vec<ToolDefinition>, PluginError> {
    if raw.is_empty() {
        return Err(PluginError::Definitions {
            path: path.to_owned(),
            message:
                "the plugin declares no tools; export at least one (export_plugin! in the SDK)"
                    .into(),
        });
    }
    let bad = |tool: &str, reason: String| PluginError::BadDefinition {
        path: path.to_owned(),
        tool: tool.to_owned(),
        reason,
    };
    let mut seen = HashSet::new();
    let mut definitions = Vec::with_capacity(raw.len());
    for definition in raw {
        let name = definition.name;
        check_name(&name).map_err(|err| bad(&name, err.to_string()))?;
        if !seen.insert(name.clone()) {
            return Err(PluginError::DuplicateTool {
                path: path.to_owned(),
                name,
                taken_by: "the plugin declares it twice".into(),
            });
        }
        let parameters: Value = serde_json::from_str(&definition.parameters).map_err(|err| {
            bad(&name, format!("parameters are not valid JSON ({err}); give a JSON Schema object as text, e.g. {{\"type\":\"object\",\"properties\":{{}}}}"))
        })?;
        let Value::Object(schema) = &parameters else {
            return Err(bad(&name, "parameters must be a JSON Schema object such as {\"type\":\"object\",\"properties\":{}}".into()));
        };
        if let Some(kind) = schema
            .get("type")
            .filter(|kind| kind.as_str() != Some("object"))
        {
            return Err(bad(&name, format!("parameters have \"type\": {kind}; the arguments of a tool are an object, so use \"type\": \"object\"")));
        }
        definitions.push(ToolDefinition::new(
            name,
            definition.description,
            parameters,
        ));
    }
    Ok(definitions)
}

/// Runs `future` to completion on a private current-thread runtime in a scoped thread,
/// so loading works from plain code and from inside a tokio runtime alike (a guest
/// waiting on a WASI clock needs a tokio timer).
fn block_on<F: Future + Send>(future: F) -> std::io::Result<F::Output>
where
    F::Output: Send,
{
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                tokio::runtime::Builder::new_current_thread()
                    .enable_time()
                    .build()
                    .map(|runtime| runtime.block_on(future))
            })
            .join()
    })
    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}
