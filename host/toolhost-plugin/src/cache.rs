//! The on-disk compile cache: `cache_dir/<key>.cwasm`, where the key hashes the
//! component's bytes and the engine's fingerprint, so a second start does not recompile
//! and an artifact is never loaded into an engine it was not compiled for.
//!
//! Entries are written to a temporary file and renamed into place, so a reader never
//! sees half a file. Nothing is evicted: a changed plugin leaves its old entry behind
//! (delete the directory to reclaim the space; it is rebuilt on the next start).

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use wasmtime::component::Component;
use wasmtime::Engine;

use super::error::error_chain;
use super::PluginError;

/// How a plugin's compiled code was obtained, and how long it took.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompileSource {
    /// Compiled by Cranelift (and stored in the cache, if there is one).
    Compiled(Duration),
    /// Loaded from the compile cache.
    CacheHit(Duration),
}

impl CompileSource {
    /// The time taken either way.
    pub fn duration(self) -> Duration {
        match self {
            CompileSource::Compiled(d) | CompileSource::CacheHit(d) => d,
        }
    }
}

impl fmt::Display for CompileSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CompileSource::Compiled(d) => write!(f, "compiled in {d:.1?}"),
            CompileSource::CacheHit(d) => write!(f, "cache hit in {d:.1?}"),
        }
    }
}

/// The compile cache of one engine.
#[derive(Debug, Clone)]
pub struct CompileCache {
    dir: Option<PathBuf>,
    fingerprint: [u8; 32],
}

impl CompileCache {
    /// A cache in `dir` (none when `None`) for `engine`.
    pub fn new(dir: Option<PathBuf>, engine: &Engine) -> Self {
        Self {
            dir,
            fingerprint: super::engine::fingerprint(engine),
        }
    }

    /// The cache file for a component of these bytes, if the cache is on.
    pub fn entry(&self, bytes: &[u8]) -> Option<PathBuf> {
        let content: [u8; 32] = Sha256::digest(bytes).into();
        let mut key = Sha256::new();
        key.update(self.fingerprint);
        key.update(content);
        let key: [u8; 32] = key.finalize().into();
        let hex: String = key.iter().map(|b| format!("{b:02x}")).collect();
        self.dir
            .as_ref()
            .map(|dir| dir.join(format!("{hex}.cwasm")))
    }

    /// The component for `bytes` (read from `path`): from the cache when there, else
    /// compiled and stored. A cache that cannot be read or written is logged and
    /// skipped, never an error.
    ///
    /// # Errors
    /// [`PluginError::Compile`] when the bytes do not compile.
    pub fn load(
        &self,
        engine: &Engine,
        path: &Path,
        bytes: &[u8],
    ) -> Result<(Component, CompileSource), PluginError> {
        let started = Instant::now();
        let entry = self.entry(bytes);
        if let Some(file) = entry.as_deref().filter(|file| file.is_file()) {
            match deserialize_cached(engine, file) {
                Ok(component) => {
                    return Ok((component, CompileSource::CacheHit(started.elapsed())))
                }
                Err(err) => {
                    tracing::warn!(
                        target: "plugin",
                        cache = %file.display(),
                        "{}: ignoring unusable compile cache entry ({}); recompiling",
                        path.display(),
                        error_chain(&err)
                    );
                    let _ = std::fs::remove_file(file);
                }
            }
        }
        let component = Component::new(engine, bytes).map_err(|err| PluginError::Compile {
            path: path.to_owned(),
            message: error_chain(&err),
        })?;
        let compiled = CompileSource::Compiled(started.elapsed());
        if let Some(file) = entry {
            if let Err(message) = store(&component, &file) {
                tracing::warn!(
                    target: "plugin",
                    cache = %file.display(),
                    "{}: cannot write the compile cache entry ({message}); the next start compiles again",
                    path.display()
                );
            }
        }
        Ok((component, compiled))
    }
}

/// Loads a cache entry.
#[allow(unsafe_code)]
fn deserialize_cached(engine: &Engine, file: &Path) -> wasmtime::Result<Component> {
    // SAFETY: `deserialize_file` trusts the file to be an artifact produced by wasmtime.
    // Files in the cache directory are written only by `store` below (from
    // `Component::serialize`, into a temporary file renamed into place, so never
    // partially), and are named by the hash of the component's bytes and the engine's
    // fingerprint, so a file is only ever loaded into an engine of the same wasmtime
    // version and configuration, for the same component. wasmtime checks the header and
    // compatibility again. The directory belongs to the user running the host; whoever
    // can write there can already run code as that user.
    unsafe { Component::deserialize_file(engine, file) }
}

/// Writes `component`'s artifact to `file` atomically.
fn store(component: &Component, file: &Path) -> Result<(), String> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let artifact = component.serialize().map_err(|err| error_chain(&err))?;
    let dir = file.parent().ok_or("the cache entry has no directory")?;
    std::fs::create_dir_all(dir).map_err(|err| format!("creating {}: {err}", dir.display()))?;
    let name = file
        .file_name()
        .and_then(|name| name.to_str())
        .unwrap_or("entry");
    let temp = dir.join(format!(
        ".{name}.{}.{}.tmp",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let result = std::fs::write(&temp, &artifact)
        .and_then(|()| std::fs::rename(&temp, file))
        .map_err(|err| format!("writing {}: {err}", file.display()));
    if result.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The smallest valid component: just the header.
    const EMPTY_COMPONENT: &[u8] = b"\0asm\x0d\0\x01\0";

    fn engine() -> Engine {
        super::super::engine::build(&super::super::PluginHostConfig {
            cache_dir: None,
            max_concurrent_calls: 1,
            ..Default::default()
        })
        .unwrap()
    }

    #[test]
    fn second_load_is_a_cache_hit() {
        let dir = tempfile::tempdir().unwrap();
        let engine = engine();
        let cache = CompileCache::new(Some(dir.path().to_owned()), &engine);
        let path = Path::new("empty.wasm");
        let (_, first) = cache.load(&engine, path, EMPTY_COMPONENT).unwrap();
        assert!(matches!(first, CompileSource::Compiled(_)), "{first:?}");
        let entry = cache.entry(EMPTY_COMPONENT).unwrap();
        assert!(entry.is_file());
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            1,
            "no temp file left"
        );
        let (_, second) = cache.load(&engine, path, EMPTY_COMPONENT).unwrap();
        assert!(matches!(second, CompileSource::CacheHit(_)), "{second:?}");
    }

    #[test]
    fn a_corrupt_entry_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let engine = engine();
        let cache = CompileCache::new(Some(dir.path().to_owned()), &engine);
        let entry = cache.entry(EMPTY_COMPONENT).unwrap();
        std::fs::write(&entry, b"garbage").unwrap();
        let (_, source) = cache
            .load(&engine, Path::new("e.wasm"), EMPTY_COMPONENT)
            .unwrap();
        assert!(matches!(source, CompileSource::Compiled(_)));
        let (_, source) = cache
            .load(&engine, Path::new("e.wasm"), EMPTY_COMPONENT)
            .unwrap();
        assert!(matches!(source, CompileSource::CacheHit(_)));
    }

    #[test]
    fn keys_depend_on_content_and_engine() {
        let engine = engine();
        let dir = Some(PathBuf::from("/c"));
        let cache = CompileCache::new(dir.clone(), &engine);
        assert_ne!(cache.entry(b"a"), cache.entry(b"b"));
        let other = Engine::default();
        assert_ne!(
            cache.entry(b"a"),
            CompileCache::new(dir, &other).entry(b"a")
        );
        assert_eq!(CompileCache::new(None, &engine).entry(b"a"), None);
    }

    #[test]
    fn compile_errors_name_the_file() {
        let engine = engine();
        let cache = CompileCache::new(None, &engine);
        let err = cache
            .load(&engine, Path::new("bad.wasm"), b"\0asm\x0d\0\x01\0\xff")
            .unwrap_err();
        assert!(matches!(err, PluginError::Compile { .. }));
        assert!(
            err.to_string()
                .starts_with("bad.wasm: the component does not compile: "),
            "{err}"
        );
    }
}
