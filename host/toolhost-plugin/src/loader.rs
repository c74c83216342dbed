//! Loading: file → manifest → bytes → component (compiled or cached) → `InstancePre` →
//! tool definitions → registry. One plugin's failure never stops the others, and a
//! plugin's tools are registered all or none.
//!
//! Start-up cannot be held by one plugin: the `.wasm` and manifest are opened without
//! blocking and refused unless they are regular files under their size caps
//! ([`MAX_COMPONENT_BYTES`], [`MAX_MANIFEST_BYTES`]); the plugins of a directory are
//! compiled on one thread per core, then all asked for their definitions at once, each
//! within [`DefinitionLimits::timeout`]; and what they declare is held to the caps of
//! [`DefinitionLimits`].

use std::collections::HashSet;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;
use tokio::sync::Semaphore;

use toolhost::error::ErrorChain;
use toolhost::registry::{check_name, Handler, RegisterError, Registry, ToolDefinition, ToolError};

use super::bindings::PluginPre;
use super::error::error_chain;
use super::host::files::FileGrant;
use super::manifest::{self, Resolved};
use super::read::read_regular_file;
use super::runtime::{PluginRuntime, PluginTool};
use super::{
    CompileSource, DefinitionCap, DefinitionLimits, LoadFailure, LoadReport, LoadedPlugin,
    PluginError, PluginErrorKind, PluginHost, PluginInfo,
};

/// Largest manifest file read (64 KiB): a manifest is a few lines of TOML; the cap
/// stops a huge (or sparse) file from being read into memory at start-up.
pub const MAX_MANIFEST_BYTES: u64 = 64 * 1024;
/// Largest component file read (256 MiB): the example plugins are 100-300 KiB and
/// large real-world components a few tens of MiB; the whole file is read into memory and
/// compiled, so the cap bounds what one file can cost the host at start-up.
pub const MAX_COMPONENT_BYTES: u64 = 256 * 1024 * 1024;

/// A plugin compiled and pre-instantiated, not yet asked for its tools.
struct Compiled {
    name: String,
    resolved: Resolved,
    compile: CompileSource,
    runtime: Arc<PluginRuntime>,
    imports: Vec<String>,
    exports: Vec<String>,
}

impl Compiled {
    fn with(self, definitions: Vec<ToolDefinition>) -> Prepared {
        Prepared {
            name: self.name,
            resolved: self.resolved,
            compile: self.compile,
            runtime: self.runtime,
            definitions,
            imports: self.imports,
            exports: self.exports,
        }
    }
}

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
    /// are compiled on one thread per core, asked for their definitions all at once
    /// (each within [`DefinitionLimits::timeout`], so a plugin that never answers delays
    /// the start by that deadline, not by its call timeout per plugin), and registered in
    /// file-name order. Logs one `debug` line per plugin (target `plugin`); callers
    /// report the [`LoadReport`] as they see fit (the CLI logs one line per plugin loaded
    /// or failed).
    pub fn load_dir(&self, dir: &Path, registry: &Registry) -> LoadReport {
        let mut report = LoadReport::default();
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
        self.register_prepared(path, self.prepare(path)?, registry)
    }

    /// Prepares every file of `files`, keeping the order: the manifest and compile (or
    /// cache) on up to one thread per core, since compiling is the slow part of a cold
    /// start; then the definitions of all of them at once ([`PluginHost::ask_all`]).
    fn prepare_all(&self, files: &[PathBuf]) -> Vec<Result<Prepared, PluginError>> {
        let compiled = self.compile_all(files);
        self.ask_all(files.iter().cloned().zip(compiled).collect())
    }

    /// Compiles every file of `files` on up to one thread per core, keeping the order.
    fn compile_all(&self, files: &[PathBuf]) -> Vec<Result<Compiled, PluginError>> {
        let threads = std::thread::available_parallelism()
            .map_or(1, usize::from)
            .clamp(1, files.len().max(1));
        let per_thread = files.len().div_ceil(threads).max(1);
        std::thread::scope(|scope| {
            #[allow(
                clippy::needless_collect,
                reason = "every worker must be spawned before the first is joined"
            )]
            let workers: Vec<_> = files
                .chunks(per_thread)
                .map(|chunk| {
                    scope.spawn(move || {
                        chunk
                            .iter()
                            .map(|path| self.compile_with(path, false))
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
                                Err(PluginError::from(PluginErrorKind::Host {
                                    message: format!(
                                        "loading {} crashed the loader thread",
                                        path.display()
                                    ),
                                }))
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
                return Err(self.taken(path, &definition.name));
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
            RegisterError::DuplicateTool { name } => self.taken(path, &name),
            RegisterError::LookAlike { name, existing } => PluginErrorKind::DuplicateTool { name, taken_by: format!("it looks like the registered tool \"{existing}\" (tool names are compared ignoring case, - and _)") }.at(path.to_owned()),
            // Reserved for a built-in, or not a valid name.
            other => PluginErrorKind::BadDefinition { tool: other.name().unwrap_or_default().to_owned(), reason: other.to_string() }.at(path.to_owned()),
        })?;
        if let Ok(mut owners) = self.owners.lock() {
            for tool in &tools {
                owners.insert(tool.clone(), path.to_owned());
            }
        }
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
    /// As [`PluginHost::load_file`], except [`PluginErrorKind::GrantDenied`] and
    /// [`PluginErrorKind::DuplicateTool`] for a name taken in a registry.
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
        let compiled = self.compile_with(path, any_grant);
        self.ask_all(vec![(path.to_owned(), compiled)])
            .pop()
            .unwrap_or_else(|| unreachable!("one answer per plugin"))
    }

    /// Asks every compiled plugin of `plugins` for its definitions, all at once (up to
    /// the pool's concurrent calls), each within [`DefinitionLimits::timeout`], and
    /// checks them. Keeps the order; a failed compile is passed through.
    fn ask_all(
        &self,
        plugins: Vec<(PathBuf, Result<Compiled, PluginError>)>,
    ) -> Vec<Result<Prepared, PluginError>> {
        let caps = self.config.definition_limits.clone();
        let gate = Arc::new(Semaphore::new(self.pool.concurrent_calls.max(1) as usize));
        let asking = plugins.iter().filter(|(_, c)| c.is_ok()).count();
        let paths: Vec<PathBuf> = plugins.iter().map(|(path, _)| path.clone()).collect();
        let answers = block_on(asking, async move {
            let tasks: Vec<_> = plugins
                .into_iter()
                .map(|(path, compiled)| {
                    let task = compiled.map(|compiled| {
                        tokio::spawn(ask_definitions(
                            path.clone(),
                            compiled,
                            caps.clone(),
                            Arc::clone(&gate),
                        ))
                    });
                    (path, task)
                })
                .collect();
            let mut answers = Vec::with_capacity(tasks.len());
            for (path, task) in tasks {
                answers.push(match task {
                    Ok(task) => task.await.unwrap_or_else(|_| {
                        Err(PluginError::from(PluginErrorKind::Host {
                            message: format!(
                                "asking {} for its definitions crashed the loader task",
                                path.display()
                            ),
                        }))
                    }),
                    Err(err) => Err(err),
                });
            }
            answers
        });
        answers.unwrap_or_else(|err| {
            paths
                .iter()
                .map(|path| {
                    Err(PluginError::from(PluginErrorKind::Host {
                        message: format!(
                            "cannot start a tokio runtime to load {}: {err}",
                            path.display()
                        ),
                    }))
                })
                .collect()
        })
    }

    /// Resolves the manifest of the plugin at `path`, reads and compiles (or loads from
    /// the cache) its component and pre-instantiates it: everything but its definitions.
    fn compile_with(&self, path: &Path, any_grant: bool) -> Result<Compiled, PluginError> {
        let name = path
            .file_stem()
            .and_then(|stem| stem.to_str())
            .ok_or_else(|| {
                PluginErrorKind::NotAComponent {
                    reason: "the file name is not valid UTF-8; rename it".into(),
                }
                .at(path.to_owned())
            })?
            .to_owned();
        let resolved = if any_grant {
            let mut config = self.config.clone();
            config.max_file_access = super::FileAccess::ReadWrite;
            manifest::resolve(path, &config)?
        } else {
            manifest::resolve(path, &self.config)?
        };
        let bytes = read_regular_file(path, "component", MAX_COMPONENT_BYTES)?;
        check_header(path, &bytes)?;
        let (component, compile) = self.cache.load(&self.engine, path, &bytes)?;
        let wrong_world = |err: wasmtime::Error| {
            PluginErrorKind::WrongWorld {
                message: error_chain(&err),
            }
            .at(path.to_owned())
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
        .map_err(|err| {
            PluginErrorKind::Manifest {
                message: format!("grants.root: {err}"),
            }
            .at(manifest::manifest_path(path))
        })?;
        let runtime = Arc::new(PluginRuntime::new(
            Arc::from(name.as_str()),
            pre,
            resolved.limits.clone(),
            Arc::new(files),
            Arc::clone(&self.shared),
        ));

        let component_type = component.component_type();
        let imports = component_type
            .imports(&self.engine)
            .map(|(name, _)| name.to_owned())
            .collect();
        let exports = component_type
            .exports(&self.engine)
            .map(|(name, _)| name.to_owned())
            .collect();
        Ok(Compiled {
            name,
            resolved,
            compile,
            runtime,
            imports,
            exports,
        })
    }
}

/// Asks a compiled plugin for its definitions (once one of `gate`'s permits is free, so
/// the deadline does not run while it waits for others) within `caps.timeout`, and
/// checks them against `caps`.
async fn ask_definitions(
    path: PathBuf,
    compiled: Compiled,
    caps: DefinitionLimits,
    gate: Arc<Semaphore>,
) -> Result<Prepared, PluginError> {
    // The gate is never closed.
    let _permit = gate.acquire_owned().await.ok();
    // The guest yields to the runtime at every epoch tick, so this timeout fires even
    // for a `loop {}`; dropping the call drops its store.
    let raw = match tokio::time::timeout(caps.timeout, compiled.runtime.definitions()).await {
        Ok(Ok(raw)) => raw,
        Ok(Err(err)) => {
            return Err(PluginErrorKind::Definitions {
                message: definitions_failure(err),
            }
            .at(path))
        }
        Err(_elapsed) => {
            return Err(PluginErrorKind::Definitions {
                message: format!(
                "it did not answer within {} (the definitions deadline, DefinitionLimits::timeout)",
                super::units::format_duration(caps.timeout)
            ),
            }
            .at(path))
        }
    };
    let definitions = validate(&path, raw, &caps)?;
    Ok(compiled.with(definitions))
}

impl PluginHost {
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

/// What went wrong asking for the definitions, for the operator (the [`ToolError`]
/// texts are written for a model and name a tool).
fn definitions_failure(err: ToolError) -> String {
    match err {
        ToolError::ToolPanicked { message, .. } => format!("it crashed: {message}"),
        ToolError::TimedOut { limit, .. } => format!(
            "it did not answer within {} (its timeout)",
            super::units::format_duration(limit)
        ),
        ToolError::LimitExceeded { limit, message, .. } => {
            format!("it hit its {limit} limit: {message}")
        }
        other => other.to_string(),
    }
}

/// Checks the WebAssembly header: a component, not a core module or something else.
fn check_header(path: &Path, bytes: &[u8]) -> Result<(), PluginError> {
    let not = |reason: &str| {
        PluginErrorKind::NotAComponent {
            reason: reason.to_owned(),
        }
        .at(path)
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

/// The plugin's definitions as registry definitions, checked: within `caps` (count,
/// sizes, schema depth), valid unique names, parameters a JSON object schema, at least
/// one tool.
fn validate(
    path: &Path,
    raw: Vec<super::bindings::exports::toolhost::plugin::tools::ToolDefinition>,
    caps: &DefinitionLimits,
) -> Result<Vec<ToolDefinition>, PluginError> {
    if raw.is_empty() {
        return Err(PluginErrorKind::Definitions {
            message:
                "the plugin declares no tools; export at least one (export_plugin! in the SDK)"
                    .into(),
        }
        .at(path.to_owned()));
    }
    let over = |tool: Option<&str>, cap: DefinitionCap, actual: usize, limit: usize| {
        PluginErrorKind::DefinitionsTooLarge {
            tool: tool.map(str::to_owned),
            cap,
            actual: actual as u64,
            limit: limit as u64,
        }
        .at(path.to_owned())
    };
    if raw.len() > caps.max_tools {
        return Err(over(None, DefinitionCap::Tools, raw.len(), caps.max_tools));
    }
    // Sizes before parsing anything: a tool over its own cap is named first, then the
    // plugin's total.
    let mut total = 0_usize;
    for definition in &raw {
        let name = Some(definition.name.as_str());
        if definition.description.len() > caps.max_description_bytes {
            return Err(over(
                name,
                DefinitionCap::Description,
                definition.description.len(),
                caps.max_description_bytes,
            ));
        }
        if definition.parameters.len() > caps.max_schema_bytes {
            return Err(over(
                name,
                DefinitionCap::Schema,
                definition.parameters.len(),
                caps.max_schema_bytes,
            ));
        }
        total = total
            .saturating_add(definition.name.len())
            .saturating_add(definition.description.len())
            .saturating_add(definition.parameters.len());
    }
    if total > caps.max_total_bytes {
        return Err(over(
            None,
            DefinitionCap::Total,
            total,
            caps.max_total_bytes,
        ));
    }
    let bad = |tool: &str, reason: String| {
        PluginErrorKind::BadDefinition {
            tool: tool.to_owned(),
            reason,
        }
        .at(path.to_owned())
    };
    let mut seen = HashSet::new();
    let mut definitions = Vec::with_capacity(raw.len());
    for definition in raw {
        let name = definition.name;
        check_name(&name).map_err(|err| bad(&name, err.to_string()))?;
        if !seen.insert(name.clone()) {
            return Err(PluginErrorKind::DuplicateTool {
                name,
                taken_by: "the plugin declares it twice".into(),
            }
            .at(path.to_owned()));
        }
        let parameters: Value = serde_json::from_str(&definition.parameters).map_err(|err| {
            bad(&name, format!("parameters are not valid JSON ({err}); give a JSON Schema object as text, e.g. {{\"type\":\"object\",\"properties\":{{}}}}"))
        })?;
        let depth = json_depth(&parameters);
        if depth > caps.max_schema_depth {
            return Err(over(
                Some(&name),
                DefinitionCap::SchemaDepth,
                depth,
                caps.max_schema_depth,
            ));
        }
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

/// The nesting depth of `value`: 1 for a scalar or an empty container, one more per
/// level. serde_json refuses input nested past 128 levels, so the recursion is bounded.
fn json_depth(value: &Value) -> usize {
    let children = match value {
        Value::Array(items) => items.iter().map(json_depth).max(),
        Value::Object(map) => map.values().map(json_depth).max(),
        _ => return 1,
    };
    1 + children.unwrap_or(0)
}

/// Runs `future` to completion on a private runtime (up to one worker per core, at most
/// `tasks`) in a scoped thread, so loading works from plain code and from inside a tokio
/// runtime alike (a guest waiting on a WASI clock needs a tokio timer).
fn block_on<F: Future + Send>(tasks: usize, future: F) -> std::io::Result<F::Output>
where
    F::Output: Send,
{
    let workers = std::thread::available_parallelism()
        .map_or(1, usize::from)
        .clamp(1, tasks.max(1));
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(workers)
                    .thread_name("plugin-load")
                    .enable_time()
                    .build()
                    .map(|runtime| runtime.block_on(future))
            })
            .join()
    })
    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}
