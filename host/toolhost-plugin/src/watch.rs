//! Hot reload: a plugins directory watched while the host serves. A `.wasm` added is
//! loaded, one changed (or its manifest `NAME.toml` changed, added or removed) is loaded
//! again in place of its old version, one removed is unloaded — all without a restart.
//!
//! - **Atomic per plugin**: the new version is compiled, asked for its tools and checked
//!   first; then its tools replace the old ones in one step
//!   ([`Registry::replace_all`](toolhost::registry::Registry::replace_all)). A caller
//!   sees the old tools or the new ones, never a mix.
//! - **A broken new file leaves the old version serving**, and the reason is logged (an
//!   error, inside [`WatchEvent`]). It is tried again when the file changes again.
//! - **Calls in flight finish on the version they started on**: a call holds its handler
//!   (and so its compiled component) until it ends.
//! - **Half-written files are not loaded**: a file is acted on once it has looked the same
//!   (size, modification time, inode) on two polls in a row, so a copy in progress is
//!   seen whole. Write the new file under another name and rename it into place for an
//!   instant switch.
//!
//! The directory is polled (every [`DEFAULT_POLL_INTERVAL`]): a directory of a few plugins
//! costs a `readdir` and a `stat` per file each time, works the same on every file system
//! (network mounts and containers' bind mounts included, where change events are not
//! delivered) and needs no extra dependency.
//!
//! ```no_run
//! # async fn watch(host: std::sync::Arc<toolhost_plugin::PluginHost>,
//! #     registry: std::sync::Arc<toolhost::registry::Registry>,
//! #     report: &toolhost_plugin::LoadReport) {
//! use toolhost_plugin::watch::{PluginWatcher, DEFAULT_POLL_INTERVAL};
//!
//! let watcher = PluginWatcher::new(host, "plugins".as_ref(), registry, report);
//! watcher.run(DEFAULT_POLL_INTERVAL, |event| println!("{event}")).await;
//! # }
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use toolhost::registry::Registry;

use super::lock::{LockError, LockPolicy, PluginLock};
use super::manifest::manifest_path;
use super::{LoadReport, LoadedPlugin, PluginError, PluginHost};

/// How often the directory is looked at by default: half a second.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_millis(500);

/// What the watcher did on one change.
#[derive(Debug)]
#[non_exhaustive]
pub enum WatchEvent {
    /// A new plugin file was loaded.
    Loaded(LoadedPlugin),
    /// A changed plugin was loaded in place of its old version (whose tools are named).
    Reloaded {
        /// The new version.
        plugin: LoadedPlugin,
        /// The old version's tools, now gone (or replaced by the new ones).
        old_tools: Vec<String>,
    },
    /// A plugin file was removed: its tools are gone.
    Unloaded {
        /// The removed `.wasm` file.
        path: PathBuf,
        /// The tools taken away.
        tools: Vec<String>,
    },
    /// A new or changed file failed to load; the old version (if any) keeps serving.
    Failed {
        /// The file.
        path: PathBuf,
        /// The tools still serving from the old version (empty for a new file).
        serving: Vec<String>,
        /// Why (its message names the file).
        error: PluginError,
    },
}

impl std::fmt::Display for WatchEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WatchEvent::Loaded(plugin) => write!(
                f,
                "plugin {} added: loaded {} tool(s) [{}]",
                plugin.name,
                plugin.tools.len(),
                plugin.tools.join(", ")
            ),
            WatchEvent::Reloaded { plugin, old_tools } => write!(
                f,
                "plugin {} changed: reloaded, tools now [{}] (were [{}])",
                plugin.name,
                plugin.tools.join(", "),
                old_tools.join(", ")
            ),
            WatchEvent::Unloaded { path, tools } => write!(
                f,
                "plugin {} removed: unloaded its tool(s) [{}]",
                path.display(),
                tools.join(", ")
            ),
            WatchEvent::Failed { serving, error, .. } if serving.is_empty() => {
                write!(f, "new plugin not loaded: {error}")
            }
            WatchEvent::Failed { serving, error, .. } => write!(
                f,
                "changed plugin not loaded, its old version keeps serving [{}]: {error}",
                serving.join(", ")
            ),
        }
    }
}

/// What a plugin's files looked like at one poll: the `.wasm` and the manifest
/// (size, modification time, inode), `None` where a file is missing.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Fingerprint {
    wasm: Option<Stamp>,
    manifest: Option<Stamp>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Stamp {
    len: u64,
    modified: Option<SystemTime>,
    inode: u64,
}

impl Fingerprint {
    fn of(wasm: &Path) -> Self {
        Self {
            wasm: stamp(wasm),
            manifest: stamp(&manifest_path(wasm)),
        }
    }
}

fn stamp(path: &Path) -> Option<Stamp> {
    // Not following links would miss a plugin installed as a link; the loader itself
    // decides what it accepts.
    let meta = std::fs::metadata(path).ok()?;
    #[cfg(unix)]
    let inode = std::os::unix::fs::MetadataExt::ino(&meta);
    #[cfg(not(unix))]
    let inode = 0;
    Some(Stamp {
        len: meta.len(),
        modified: meta.modified().ok(),
        inode,
    })
}

/// One plugin file as the watcher knows it.
#[derive(Debug, Clone)]
struct Known {
    /// The files as last acted on (loaded, or failed).
    fingerprint: Fingerprint,
    /// The tools it serves now (empty when it failed and had no old version).
    tools: Vec<String>,
}

/// Watches a plugins directory and keeps a registry's plugin tools in step with it.
pub struct PluginWatcher {
    host: Arc<PluginHost>,
    dir: PathBuf,
    registry: Arc<Registry>,
    /// The directory had a lock file when watching began: every later load must be
    /// pinned by the lock as it is then, and a lock removed since loads nothing.
    pinned: bool,
    known: BTreeMap<PathBuf, Known>,
    /// Files seen changed at the last poll, with what they looked like: acted on when
    /// the next poll sees the same.
    pending: BTreeMap<PathBuf, Fingerprint>,
    /// Applied to the lock each time it is read (`--require-signer`).
    lock_policy: Option<LockPolicy>,
}

impl std::fmt::Debug for PluginWatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginWatcher")
            .field("dir", &self.dir)
            .field("plugins", &self.known.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl PluginWatcher {
    /// A watcher of `dir`, whose plugins `report` says were loaded into `registry` by
    /// `host` (the files that failed are tried again once they change).
    pub fn new(
        host: Arc<PluginHost>,
        dir: &Path,
        registry: Arc<Registry>,
        report: &LoadReport,
    ) -> Self {
        let mut known = BTreeMap::new();
        for plugin in &report.loaded {
            known.insert(
                plugin.path.clone(),
                Known {
                    fingerprint: Fingerprint::of(&plugin.path),
                    tools: plugin.tools.clone(),
                },
            );
        }
        for failure in &report.failed {
            if failure.path.extension().is_some_and(|ext| ext == "wasm") {
                known.insert(
                    failure.path.clone(),
                    Known {
                        fingerprint: Fingerprint::of(&failure.path),
                        tools: Vec::new(),
                    },
                );
            }
        }
        Self {
            host,
            dir: dir.to_owned(),
            registry,
            pinned: report.lock.is_some()
                || std::fs::symlink_metadata(PluginLock::path_in(dir)).is_ok(),
            known,
            pending: BTreeMap::new(),
            lock_policy: None,
        }
    }

    /// Applies `policy` to the lock each time it is read for a load (the same policy
    /// the first load applied, e.g. `--require-signer`), so that a plugin hot-loaded
    /// later meets the same rule.
    #[must_use]
    pub fn with_lock_policy(mut self, policy: LockPolicy) -> Self {
        self.lock_policy = Some(policy);
        self
    }

    /// Polls every `interval` until the future is dropped, calling `report` with what
    /// each change did. Loading runs on a blocking thread (compiling takes a while), one
    /// plugin at a time.
    pub async fn run(mut self, interval: Duration, mut report: impl FnMut(&WatchEvent)) {
        let mut ticker = tokio::time::interval(interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticker.tick().await;
            let Ok((watcher, events)) = tokio::task::spawn_blocking(move || {
                let events = self.poll();
                (self, events)
            })
            .await
            else {
                tracing::error!(target: "plugin", "the plugin watcher crashed; plugins are no longer reloaded");
                return;
            };
            self = watcher;
            for event in &events {
                report(event);
            }
        }
    }

    /// Looks at the directory once and acts on every file that changed and has settled
    /// (looked the same at the poll before). Blocking: compiles new versions.
    pub fn poll(&mut self) -> Vec<WatchEvent> {
        let mut now: BTreeMap<PathBuf, Fingerprint> = BTreeMap::new();
        if let Ok(entries) = std::fs::read_dir(&self.dir) {
            for entry in entries.filter_map(Result::ok) {
                let path = entry.path();
                if path.extension().is_some_and(|ext| ext == "wasm") && !path.is_dir() {
                    let fingerprint = Fingerprint::of(&path);
                    now.insert(path, fingerprint);
                }
            }
        }
        // Files gone since they were known count as changed to "missing".
        for path in self.known.keys() {
            now.entry(path.clone()).or_insert(Fingerprint {
                wasm: None,
                manifest: None,
            });
        }
        let mut events = Vec::new();
        let mut pending = BTreeMap::new();
        for (path, fingerprint) in now {
            let known = self.known.get(&path);
            if known.is_some_and(|known| known.fingerprint == fingerprint) {
                continue;
            }
            if known.is_none() && fingerprint.wasm.is_none() {
                continue;
            }
            // Changed: act once it looks the same as at the last poll.
            if self.pending.get(&path) != Some(&fingerprint) {
                pending.insert(path, fingerprint);
                continue;
            }
            events.push(self.apply(&path, fingerprint));
        }
        self.pending = pending;
        events
    }

    /// The directory's lock file as it is now (`None`: there is none, and there was none
    /// when watching began).
    ///
    /// # Errors
    /// [`PluginErrorKind::Lock`](super::PluginErrorKind::Lock) when it cannot be read or is
    /// invalid, or when it was removed after watching began.
    fn current_lock(&self) -> Result<Option<PluginLock>, PluginError> {
        let mut lock = PluginLock::read(&self.dir)?;
        if let (Some(lock), Some(policy)) = (lock.as_mut(), &self.lock_policy) {
            policy(lock);
        }
        match lock {
            None if self.pinned => Err(LockError::Invalid {
                path: PluginLock::path_in(&self.dir),
                message: "it was removed while the host serves pinned plugins; nothing new \
                          loads until it is back (run `host lock --plugins DIR` to pin the \
                          directory's plugins again)"
                    .to_owned(),
            }
            .into()),
            lock => Ok(lock),
        }
    }

    /// Loads, reloads or unloads the plugin at `path`, which now looks like `fingerprint`.
    fn apply(&mut self, path: &Path, fingerprint: Fingerprint) -> WatchEvent {
        let old_tools = self
            .known
            .get(path)
            .map(|known| known.tools.clone())
            .unwrap_or_default();
        if fingerprint.wasm.is_none() {
            if let Err(err) = self.registry.replace_all(&old_tools, Vec::new()) {
                // Only when a tool of the plugin was taken away by someone else.
                tracing::warn!(target: "plugin", "unloading {}: {err}", path.display());
            }
            // Its prompts and resources go with it (registered under its name, the
            // file stem).
            if let Some(name) = path.file_stem().and_then(|stem| stem.to_str()) {
                self.registry.catalog().remove(name);
            }
            self.known.remove(path);
            return WatchEvent::Unloaded {
                path: path.to_owned(),
                tools: old_tools,
            };
        }
        match self.current_lock().and_then(|lock| {
            self.host
                .reload_file(path, &old_tools, &self.registry, lock.as_ref())
        }) {
            Ok(plugin) => {
                self.known.insert(
                    path.to_owned(),
                    Known {
                        fingerprint,
                        tools: plugin.tools.clone(),
                    },
                );
                if old_tools.is_empty() {
                    WatchEvent::Loaded(plugin)
                } else {
                    WatchEvent::Reloaded { plugin, old_tools }
                }
            }
            Err(error) => {
                // Remembered as seen, so it is tried again only when it changes again.
                self.known.insert(
                    path.to_owned(),
                    Known {
                        fingerprint,
                        tools: old_tools.clone(),
                    },
                );
                WatchEvent::Failed {
                    path: path.to_owned(),
                    serving: old_tools,
                    error,
                }
            }
        }
    }
}
