//! Compiling: a plugin's manifest and component read once, checked against the pins,
//! the manifest resolved, the component compiled (or loaded from the compile cache),
//! its header and world checked and pre-instantiated: everything but its definitions.
//! A directory's plugins compile on one thread per core.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use toolhost::registry::ToolDefinition;

use super::pins::{check_pins, Pins};
use super::Prepared;
use crate::cache::CompileSource;
use crate::engine::Metering;
use crate::error::error_chain;
use crate::host::file_grant::FileGrant;
use crate::host::http::HttpGrant;
use crate::lock::Sha256Digest;
use crate::manifest::{self, Resolved};
use crate::optimize::OptimizeJob;
use crate::read::{read_manifest_bytes, read_regular_file, MAX_COMPONENT_BYTES};
use crate::runtime::{PluginRuntime, ShardPres};
use crate::state::Grants;
use crate::world::Version;
use crate::{CompileTiers, PluginError, PluginErrorKind, PluginHost};

/// A plugin compiled and pre-instantiated, not yet asked for its tools.
/// What a 0.3.0 plugin offers besides tools, asked for at load: its prompts and its
/// resource templates, `None` when it offers none (no export, or empty lists).
#[derive(Default)]
pub(super) struct Offer {
    pub(super) prompts: Option<Vec<toolhost::catalog::PromptDefinition>>,
    pub(super) resources: Option<Vec<toolhost::catalog::ResourceTemplate>>,
}

pub(super) struct Compiled {
    name: String,
    /// The namespace its tools and prompts are offered under: the operator's, else the
    /// manifest's.
    namespace: Option<String>,
    resolved: Resolved,
    compile: CompileSource,
    pub(super) runtime: Arc<PluginRuntime>,
    imports: Vec<String>,
    exports: Vec<String>,
    optimize: Option<OptimizeJob>,
}

impl Compiled {
    /// Whether the component exports `export` (by its full name).
    pub(super) fn exports(&self, export: &str) -> bool {
        self.exports.iter().any(|e| e == export)
    }

    /// The plugin prepared with its definitions and offer, renamed into its namespace.
    ///
    /// # Errors
    /// [`PluginErrorKind::Namespace`] when the namespace makes a name too long.
    pub(super) fn with(
        self,
        path: &Path,
        definitions: Vec<ToolDefinition>,
        mut offer: Offer,
    ) -> Result<Prepared, PluginError> {
        let mut guest_names = Vec::with_capacity(definitions.len());
        let mut definitions = definitions;
        if let Some(namespace) = &self.namespace {
            let rename = |name: &mut String| -> Result<(), PluginError> {
                *name = crate::namespace::check_final_name(namespace, name).map_err(|reason| {
                    PluginErrorKind::Namespace {
                        namespace: namespace.clone(),
                        reason,
                    }
                    .at(path.to_owned())
                })?;
                Ok(())
            };
            for definition in &mut definitions {
                guest_names.push(Arc::from(definition.name.as_str()));
                rename(&mut definition.name)?;
            }
            for prompt in offer.prompts.iter_mut().flatten() {
                rename(&mut prompt.name)?;
            }
        } else {
            guest_names.extend(definitions.iter().map(|d| Arc::from(d.name.as_str())));
        }
        // The manifest's task settings are the plugin's, for every one of its tools.
        let manifest = self.resolved.manifest.as_ref();
        let support = manifest.and_then(|manifest| manifest.task_support);
        let task_timeout = manifest
            .and_then(|manifest| manifest.limits.task_timeout_ms)
            .map(std::time::Duration::from_millis);
        // Approval travels with each tool, so a plugin loaded or reloaded later (hot
        // reload) is asked about as its manifest says, and the question shows its grants.
        let confirm = manifest.is_some_and(|manifest| manifest.confirm);
        let http: Vec<String> = self.resolved.http.iter().map(ToString::to_string).collect();
        let note = format!(
            "Plugin {}: files {}, http {}",
            self.name,
            self.resolved.files,
            if http.is_empty() {
                "none".to_owned()
            } else {
                http.join(", ")
            }
        );
        let definitions = definitions
            .into_iter()
            .map(|mut definition| {
                definition = definition.with_approval(confirm, Some(note.clone()));
                if let Some(support) = support {
                    definition = definition.with_task_support(support);
                }
                if let Some(timeout) = task_timeout {
                    definition = definition.with_task_timeout(timeout);
                }
                definition
            })
            .collect();
        Ok(Prepared {
            offer,
            guest_names,
            namespace: self.namespace,
            name: self.name,
            resolved: self.resolved,
            compile: self.compile,
            runtime: self.runtime,
            definitions,
            imports: self.imports,
            exports: self.exports,
            optimize: self.optimize,
        })
    }
}

/// The components one directory load compiled (or read from the cache), by digest and
/// backend, for the load's duration: a component found under several file names (one
/// plugin offered twice, under two namespaces or with two configurations) is compiled,
/// read and held in memory once. Its plugins still get an instance pre, limits and grants
/// of their own.
#[derive(Default)]
pub(super) struct SharedComponents(std::sync::Mutex<std::collections::HashMap<SharedKey, Shared>>);

/// A component's content hash (BLAKE3) and the address of the shards it was loaded for.
type SharedKey = ([u8; 32], usize);

/// The component, and whether it is quick code.
type Shared = (wasmtime::component::Component, bool);

impl SharedComponents {
    fn get(&self, key: &SharedKey) -> Option<Shared> {
        self.0.lock().ok()?.get(key).cloned()
    }

    fn put(&self, key: SharedKey, component: wasmtime::component::Component, quick: bool) {
        if let Ok(mut map) = self.0.lock() {
            map.entry(key).or_insert((component, quick));
        }
    }
}

impl PluginHost {
    /// The runtime of the plugin at `path`, compiled and pre-instantiated but neither
    /// asked for its tools nor registered (for tests of the runtime itself).
    #[cfg(test)]
    pub(crate) fn compile_runtime(&self, path: &Path) -> Result<Arc<PluginRuntime>, PluginError> {
        self.compile_with(path, false, None, None)
            .map(|compiled| compiled.runtime)
    }

    /// Compiles every file of `files` on up to one thread per core, keeping the order.
    pub(super) fn compile_all(
        &self,
        files: &[PathBuf],
        pins: Option<Pins<'_>>,
    ) -> Vec<Result<Compiled, PluginError>> {
        let threads = std::thread::available_parallelism()
            .map_or(1, usize::from)
            .clamp(1, files.len().max(1));
        let per_thread = files.len().div_ceil(threads).max(1);
        let shared = SharedComponents::default();
        let shared = &shared;
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
                            .map(|path| self.compile_with(path, false, pins, Some(shared)))
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

    /// Reads the manifest and component of the plugin at `path` (once each), checks
    /// their digests against `pins`, resolves the manifest, compiles (or loads from the
    /// cache, keyed by the digest) the component from the bytes checked and
    /// pre-instantiates it: everything but its definitions.
    pub(super) fn compile_with(
        &self,
        path: &Path,
        any_grant: bool,
        pins: Option<Pins<'_>>,
        shared: Option<&SharedComponents>,
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
        // The lock's pins are SHA-256 (the OCI digest), hashed only when there is a lock;
        // the cache and this load know the bytes by their faster BLAKE3 hash.
        if let Some(pins) = pins {
            check_pins(
                pins,
                path,
                &Sha256Digest::of(&bytes),
                manifest_bytes.as_deref(),
            )?;
        }
        let digest = crate::cache::content_hash(&bytes);
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
        // Quick code first only for a plugin that will serve (not for `inspect`).
        let quick = match self.config.compile_tiers {
            CompileTiers::QuickFirst if !any_grant => Some(backend.quick_engine()?),
            _ => None,
        };
        // Compiled (or read from the cache) into the first shard's engine only; the
        // other shards get it from its artifact when a call first lands there.
        let engine = &backend.shards[0].engine;
        // The same bytes on the same backend: the same code, compiled once per load.
        let key = (digest, Arc::as_ptr(&backend.shards).cast::<u8>() as usize);
        let started = std::time::Instant::now();
        let (component, compile) = match shared.and_then(|shared| shared.get(&key)) {
            Some((component, true)) => (component, CompileSource::Quick(started.elapsed())),
            Some((component, false)) => (component, CompileSource::CacheHit(started.elapsed())),
            None => {
                let (component, compile) = backend
                    .cache
                    .load_into(engine, path, &bytes, &digest, quick)?;
                if let Some(shared) = shared {
                    let quick = matches!(compile, CompileSource::Quick(_));
                    shared.put(key, component.clone(), quick);
                }
                (component, compile)
            }
        };
        let wrong_world = |err: wasmtime::Error| {
            PluginErrorKind::WrongWorld {
                message: error_chain(&err),
            }
            .at(path.to_owned())
        };
        let component_type = component.component_type();
        let exports: Vec<String> = component_type
            .exports(engine)
            .map(|(name, _)| name.to_owned())
            .collect();
        let version = Version::of_exports(&exports);
        let shards = Arc::clone(&backend.shards);
        let pres = ShardPres::new(Arc::clone(&shards), component, version).map_err(wrong_world)?;

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
            // The manifest asks for it and the operator allows it.
            ask: self.config.plugin_ask && resolved.manifest.as_ref().is_some_and(|m| m.grants.ask),
            // The same for sampling: the manifest's bounds, only if the operator allows it.
            sampling: resolved
                .manifest
                .as_ref()
                .and_then(|m| m.grants.sampling)
                .filter(|_| self.config.plugin_sampling),
            // The tools it may call: what the manifest asks within what the operator
            // allows (an empty set when they share none: still a composing plugin).
            tools: resolved
                .manifest
                .as_ref()
                .and_then(|m| m.grants.tools_grant())
                .map(|grant| {
                    let allowed = match &self.config.plugin_tools {
                        Some(allowed) => grant.tools.intersect(allowed),
                        None => crate::manifest::ToolNames::Only(Vec::new()),
                    };
                    Arc::new(crate::manifest::ToolsGrant {
                        tools: allowed,
                        max_tool_calls: grant.max_tool_calls,
                    })
                }),
        };
        let runtime = Arc::new(PluginRuntime::new(
            Arc::from(name.as_str()),
            pres,
            resolved.limits.clone(),
            Arc::new(files),
            grants,
            Arc::clone(&self.shared),
        ));

        let imports = component_type
            .imports(engine)
            .map(|(name, _)| name.to_owned())
            .collect();
        let optimize = matches!(compile, CompileSource::Quick(_)).then(|| OptimizeJob {
            path: path.to_owned(),
            bytes,
            digest,
            cache: backend.cache.clone(),
            shards,
            version,
            runtime: Arc::downgrade(&runtime),
        });
        let namespace = self
            .config
            .tool_namespace(&name)
            .map(str::to_owned)
            .or_else(|| resolved.manifest.as_ref().and_then(|m| m.namespace.clone()));
        Ok(Compiled {
            name,
            namespace,
            resolved,
            compile,
            runtime,
            imports,
            exports,
            optimize,
        })
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
