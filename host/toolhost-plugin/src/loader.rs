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
use toolhost::registry::{
    check_name, Handler, RegisterError, Registry, ToolAnnotations, ToolDefinition, ToolError,
};

use super::bindings::{v0_1, PluginPre};
use super::cache;
use super::error::error_chain;
use super::host::files::FileGrant;
use super::host::http::HttpGrant;
use super::lock::{read_manifest_bytes, LockMismatch, PluginLock, Sha256Digest};
use super::manifest::{self, Resolved};
use super::read::read_regular_file;
use super::runtime::{PluginRuntime, PluginTool, PrepareShard, ShardPres, WorldPre};
use super::state::{Grants, PluginState};
use super::{
    CompileSource, DefinitionCap, DefinitionLimits, LoadFailure, LoadReport, LoadedPlugin,
    Metering, PluginError, PluginErrorKind, PluginHost, PluginInfo,
};

/// Largest manifest file read (64 KiB): a manifest is a few lines of TOML; the cap
/// stops a huge (or sparse) file from being read into memory at start-up.
pub const MAX_MANIFEST_BYTES: u64 = 64 * 1024;
/// Largest component file read (256 MiB): the example plugins are 100-300 KiB and
/// large real-world components a few tens of MiB; the whole file is read into memory and
/// compiled, so the cap bounds what one file can cost the host at start-up.
pub const MAX_COMPONENT_BYTES: u64 = 256 * 1024 * 1024;

/// The lock file a directory's plugins are checked against, and its path.
#[derive(Clone, Copy)]
struct Pins<'a> {
    lock: &'a PluginLock,
    path: &'a Path,
}

/// The `tools` export of `toolhost:plugin@0.2.0`.
pub(crate) const TOOLS_V0_2: &str = "toolhost:plugin/tools@0.2.0";
/// The `tools` export of `toolhost:plugin@0.1.0`.
pub(crate) const TOOLS_V0_1: &str = "toolhost:plugin/tools@0.1.0";

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

    /// Prepares every file of `files`, keeping the order: the manifest and compile (or
    /// cache) on up to one thread per core, since compiling is the slow part of a cold
    /// start; then the definitions of all of them at once ([`PluginHost::ask_all`]).
    fn prepare_all(
        &self,
        files: &[PathBuf],
        pins: Option<Pins<'_>>,
    ) -> Vec<Result<Prepared, PluginError>> {
        let compiled = self.compile_all(files, pins);
        self.ask_all(files.iter().cloned().zip(compiled).collect())
    }

    /// Compiles every file of `files` on up to one thread per core, keeping the order.
    fn compile_all(
        &self,
        files: &[PathBuf],
        pins: Option<Pins<'_>>,
    ) -> Vec<Result<Compiled, PluginError>> {
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
                            .map(|path| self.compile_with(path, false, pins))
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

    /// Registers a prepared plugin's tools, all or none, in place of the tools named
    /// `replacing` (none for a first load).
    fn register_prepared(
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
        registry.replace_all(replacing, batch).map_err(|err| match err {
            // Registered by someone else since the check above.
            RegisterError::DuplicateTool { name } => self.taken(path, &name),
            RegisterError::LookAlike { name, existing } => PluginErrorKind::DuplicateTool { name, taken_by: format!("it looks like the registered tool \"{existing}\" (tool names are compared ignoring case, - and _)") }.at(path.to_owned()),
            // Reserved for a built-in, or not a valid name.
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
        Ok(LoadedPlugin {
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
        Ok(PluginInfo {
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

    fn prepare(&self, path: &Path) -> Result<Prepared, PluginError> {
        self.prepare_with(path, false, None)
    }

    /// One plugin compiled (checked against `pins` first, when given) and asked for its
    /// definitions; `any_grant` resolves its manifest for inspection.
    fn prepare_with(
        &self,
        path: &Path,
        any_grant: bool,
        pins: Option<Pins<'_>>,
    ) -> Result<Prepared, PluginError> {
        let compiled = self.compile_with(path, any_grant, pins);
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

    /// Reads the manifest and component of the plugin at `path` (once each), checks
    /// their digests against `pins`, resolves the manifest, compiles (or loads from the
    /// cache, keyed by the digest) the component from the bytes checked and
    /// pre-instantiates it: everything but its definitions.
    fn compile_with(
        &self,
        path: &Path,
        any_grant: bool,
        pins: Option<Pins<'_>>,
    ) -> Result<Compiled, PluginError> {
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
        let manifest_file = manifest::manifest_path(path);
        let manifest_bytes = read_manifest_bytes(&manifest_file)?;
        let bytes = read_regular_file(path, "component", MAX_COMPONENT_BYTES)?;
        let digest = Sha256Digest::of(&bytes);
        if let Some(pins) = pins {
            check_pins(pins, path, &digest, manifest_bytes.as_deref())?;
        }
        let resolved = if any_grant {
            manifest::resolve_bytes_with(
                path,
                manifest_bytes,
                &self.config,
                manifest::Check::Inspect,
            )?
        } else {
            manifest::resolve_bytes(path, manifest_bytes, &self.config)?
        };
        check_header(path, &bytes)?;
        let backend = self.backend(Metering::for_limits(&resolved.limits))?;
        // Compiled (or read from the cache) into the first shard's engine only; the
        // other shards get it from its artifact when a call first lands there.
        let engines = backend.engines();
        let (mut components, compile) =
            backend
                .cache
                .load_into(&engines[..1], path, &bytes, digest.as_bytes())?;
        let component = components
            .pop()
            .unwrap_or_else(|| unreachable!("one engine asked, one component"));
        let wrong_world = |err: wasmtime::Error| {
            PluginErrorKind::WrongWorld {
                message: error_chain(&err),
            }
            .at(path.to_owned())
        };
        let engine = &backend.shards[0].engine;
        let component_type = component.component_type();
        let exports: Vec<String> = component_type
            .exports(engine)
            .map(|(name, _)| name.to_owned())
            .collect();
        // The world is the `tools` export the component carries; with neither, 0.2.0's
        // check names what is missing.
        let legacy =
            exports.iter().any(|e| e == TOOLS_V0_1) && !exports.iter().any(|e| e == TOOLS_V0_2);
        let first =
            world_pre(&backend.shards[0].linker, &component, legacy).map_err(wrong_world)?;
        let prepare: PrepareShard = {
            let shards: Vec<_> = backend
                .shards
                .iter()
                .map(|shard| (shard.engine.clone(), shard.linker.clone()))
                .collect();
            Box::new(move |shard| {
                let (engine, linker) = &shards[shard];
                let artifact = component.serialize()?;
                let component = cache::deserialize(engine, &artifact)?;
                world_pre(linker, &component, legacy)
            })
        };

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
        if !resolved.undeclared_config.is_empty() && !any_grant {
            tracing::warn!(
                target: "plugin",
                plugin = %name,
                "config values given for {name} that its manifest does not declare are not passed to it: {}",
                resolved.undeclared_config.join(", ")
            );
        }
        let grants = Grants {
            redactor: Arc::new(resolved.config.redactor()),
            config: Arc::new(resolved.config.clone()),
            http: Arc::new(HttpGrant {
                allow: resolved.http.clone(),
                policy: self.config.http.clone(),
                limits: resolved.limits.http.clone(),
            }),
        };
        let runtime = Arc::new(PluginRuntime::new(
            Arc::from(name.as_str()),
            ShardPres {
                first,
                engines: engines.into_iter().cloned().collect(),
                prepare,
            },
            resolved.limits.clone(),
            Arc::new(files),
            grants,
            Arc::clone(&self.shared),
        ));

        let imports = component_type
            .imports(engine)
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

/// Checks the component at `path` (`digest` of its bytes) and its manifest (`manifest`,
/// the bytes read) against the lock.
fn check_pins(
    pins: Pins<'_>,
    path: &Path,
    digest: &Sha256Digest,
    manifest: Option<&[u8]>,
) -> Result<(), PluginError> {
    let file = path
        .file_name()
        .and_then(|name| name.to_str())
        .unwrap_or_default();
    let manifest_digest = manifest.map(Sha256Digest::of);
    pins.lock
        .check(file, digest, manifest_digest.as_ref())
        .map_err(|mismatch| {
            let file = match mismatch {
                LockMismatch::Manifest { .. } => manifest::manifest_path(path),
                _ => path.to_owned(),
            };
            PluginErrorKind::Unpinned {
                lock: pins.path.to_owned(),
                mismatch,
            }
            .at(file)
        })
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
pub(super) fn validate(
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
        let title = definition.title.as_deref().map_or(0, str::len);
        if title > caps.max_title_bytes {
            return Err(over(
                name,
                DefinitionCap::Title,
                title,
                caps.max_title_bytes,
            ));
        }
        let output = definition.output_schema.as_deref().map_or(0, str::len);
        if output > caps.max_schema_bytes {
            return Err(over(
                name,
                DefinitionCap::OutputSchema,
                output,
                caps.max_schema_bytes,
            ));
        }
        total = total
            .saturating_add(definition.name.len())
            .saturating_add(definition.description.len())
            .saturating_add(definition.parameters.len())
            .saturating_add(title)
            .saturating_add(output);
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
        let mut tool = ToolDefinition::new(name, definition.description, parameters);
        if let Some(title) = definition.title {
            if title.trim().is_empty() || title.contains(|c: char| c.is_control()) {
                return Err(bad(&tool.name, "its title is empty or holds control characters (a line break, a tab); give a short one-line name such as \"Get weather\", or none".into()));
            }
            tool = tool.with_title(title);
        }
        if let Some(hints) = definition.annotations {
            tool = tool.with_annotations(ToolAnnotations {
                read_only_hint: hints.read_only_hint,
                destructive_hint: hints.destructive_hint,
                idempotent_hint: hints.idempotent_hint,
                open_world_hint: hints.open_world_hint,
            });
        }
        if let Some(text) = definition.output_schema {
            let schema = output_schema(&text, caps).map_err(|err| match err {
                OutputSchemaError::TooDeep(depth) => over(
                    Some(&tool.name),
                    DefinitionCap::OutputSchemaDepth,
                    depth,
                    caps.max_schema_depth,
                ),
                OutputSchemaError::Invalid(reason) => bad(&tool.name, reason),
            })?;
            tool = tool.with_output_schema(schema);
        }
        definitions.push(tool);
    }
    Ok(definitions)
}

/// An output schema's text as JSON: an object schema (`"type": "object"`, as MCP
/// requires of `outputSchema`) within the depth cap.
///
/// # Errors
/// `Err(Ok(reason))` when it is not such a schema, `Err(Err((depth, cap)))` when it
/// nests too deep.
fn output_schema(text: &str, caps: &DefinitionLimits) -> Result<Value, OutputSchemaError> {
    let schema: Value = serde_json::from_str(text).map_err(|err| {
        OutputSchemaError::Invalid(format!("its output schema is not valid JSON ({err}); give a JSON Schema object as text, e.g. {{\"type\":\"object\",\"properties\":{{}}}}"))
    })?;
    let depth = json_depth(&schema);
    if depth > caps.max_schema_depth {
        return Err(OutputSchemaError::TooDeep(depth));
    }
    match schema.get("type") {
        Some(Value::String(kind)) if kind == "object" => Ok(schema),
        _ => Err(OutputSchemaError::Invalid("its output schema must be a JSON Schema object with \"type\": \"object\" (MCP structured results are objects); return an object and describe it, or declare no output schema".into())),
    }
}

/// Why an output schema was refused.
enum OutputSchemaError {
    /// Not an object schema (the reason).
    Invalid(String),
    /// Nested this deep, over the cap.
    TooDeep(usize),
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

/// `component` pre-instantiated with `linker` for its world: `toolhost:plugin@0.1.0`
/// when `legacy`, else 0.2.0.
fn world_pre(
    linker: &wasmtime::component::Linker<PluginState>,
    component: &wasmtime::component::Component,
    legacy: bool,
) -> wasmtime::Result<WorldPre> {
    let instance_pre = linker.instantiate_pre(component)?;
    Ok(if legacy {
        WorldPre::V0_1(v0_1::PluginPre::new(instance_pre)?)
    } else {
        WorldPre::V0_2(PluginPre::new(instance_pre)?)
    })
}
