//! The on-disk compile cache: `cache_dir/<key>.cwasm`, where the key hashes the
//! component's bytes and the engine's fingerprint, so a second start does not recompile
//! and an artifact is never loaded into an engine it was not compiled for.
//!
//! An entry is `MAGIC`, then a keyed BLAKE3 tag, then wasmtime's serialised artifact. The
//! tag covers the entry's key and the artifact, under the cache's own random key, so an
//! entry is only loaded if this cache wrote it for this component and this engine; see
//! [`check_cache_dir`] for the threat model, the placement and ownership rules.
//!
//! Entries are written, `0600`, to a temporary file and renamed into place, so a reader
//! never sees half a file. Nothing is evicted: a changed plugin leaves its old entry
//! behind (delete the directory to reclaim the space; it is rebuilt on the next start).

use std::fmt;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use wasmtime::component::Component;
use wasmtime::Engine;

use super::error::error_chain;
use super::{PluginError, PluginErrorKind};

use crate::cache_dir as dir;
pub use crate::cache_dir::{check_cache_dir, CacheError, Placement};

/// The first bytes of every entry: the format, version 2 (a keyed BLAKE3 tag, then the
/// artifact). Version 1 entries (an HMAC-SHA256 tag) are not trusted: their magic does not
/// match, so they are rejected, deleted and compiled again.
///
/// Why BLAKE3: a warm start checks the tag of every plugin's entry (hundreds of KB each);
/// with hundreds of plugins, HMAC-SHA256 was a quarter of the start's CPU. Keyed BLAKE3 is a
/// PRF and MAC of the same 256-bit strength, several times faster (SIMD over the chunks).
const MAGIC: &[u8; 8] = b"wthc\x00\x00\x00\x02";

/// Bytes of an entry's tag (keyed BLAKE3, its default 256-bit output).
const TAG_LEN: usize = blake3::OUT_LEN;

/// What the tag covers before the entry's key and artifact, so a tag made for anything
/// else under the same key never verifies here.
const TAG_DOMAIN: &[u8] = b"wasm-toolhost compile cache entry v2\0";

/// The largest entry read: an entry is read into memory whole (to check its tag over the
/// very bytes deserialised), so this bounds that allocation. A compiled artifact is a few
/// times its component, and a component is far smaller than this; an entry above it (none
/// this host writes) is a miss, deleted, and the component compiled.
pub(crate) const MAX_ENTRY_BYTES: u64 = 1 << 30;

/// How a plugin's compiled code was obtained, and how long it took.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompileSource {
    /// Compiled by Cranelift (and stored in the cache, if there is one).
    Compiled(Duration),
    /// Loaded from the compile cache, or shared with a plugin of the same directory load
    /// whose component has the same bytes (one component under two file names is
    /// compiled and held in memory once).
    CacheHit(Duration),
    /// Compiled quickly, not optimized, and not cached
    /// ([`CompileTiers::QuickFirst`](crate::CompileTiers::QuickFirst)): the optimized
    /// code is compiled in the background and swapped in.
    Quick(Duration),
}

impl CompileSource {
    /// The time taken either way.
    pub fn duration(self) -> Duration {
        match self {
            CompileSource::Compiled(d) | CompileSource::CacheHit(d) | CompileSource::Quick(d) => d,
        }
    }
}

impl fmt::Display for CompileSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CompileSource::Compiled(d) => write!(f, "compiled in {d:.1?}"),
            CompileSource::CacheHit(d) => write!(f, "cache hit in {d:.1?}"),
            CompileSource::Quick(d) => write!(
                f,
                "quick code compiled in {d:.1?} (optimized code follows from the background)"
            ),
        }
    }
}

/// The compile cache of one engine.
#[derive(Clone)]
pub(crate) struct CompileCache {
    dir: Option<CacheDir>,
    fingerprint: [u8; 32],
}

/// An opened cache directory and its key.
#[derive(Clone)]
struct CacheDir {
    /// Canonical.
    path: PathBuf,
    key: [u8; dir::KEY_LEN],
}

impl fmt::Debug for CompileCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the key.
        f.debug_struct("CompileCache")
            .field("dir", &self.dir.as_ref().map(|dir| &dir.path))
            .finish_non_exhaustive()
    }
}

/// Why a cache entry was not used.
enum Miss {
    /// There is none.
    Absent,
    /// There is one, and it must not be loaded (it is deleted).
    Rejected(String),
}

impl CompileCache {
    /// The cache in `dir` (none when `None`) for `engine`, opened as [`dir`] describes:
    /// refused inside, equal to or above any of `roots`, created `0700`, refused when
    /// another user owns it or may write it; its key read or made.
    ///
    /// # Errors
    /// [`CacheError`] naming the path and the fix.
    pub(crate) fn open(
        dir: Option<&Path>,
        roots: &[PathBuf],
        engine: &Engine,
    ) -> Result<Self, CacheError> {
        let dir = match dir {
            Some(dir) => {
                let (path, key) = dir::open(dir, roots)?;
                Some(CacheDir { path, key })
            }
            None => None,
        };
        Ok(Self {
            dir,
            fingerprint: super::engine::fingerprint(engine),
        })
    }

    /// The same cache directory for another engine: its entries are keyed by that
    /// engine's fingerprint, so the two engines never load each other's artifacts.
    pub(crate) fn for_engine(&self, engine: &Engine) -> Self {
        Self {
            dir: self.dir.clone(),
            fingerprint: super::engine::fingerprint(engine),
        }
    }

    /// The entry's key for a component of these bytes.
    #[cfg(test)]
    fn key(&self, bytes: &[u8]) -> [u8; 32] {
        self.key_of(blake3::hash(bytes).as_bytes())
    }

    /// The entry's key for a component whose bytes have this BLAKE3 hash
    /// ([`content_hash`]): the engine's fingerprint and the hash, hashed.
    fn key_of(&self, digest: &[u8; 32]) -> [u8; 32] {
        let mut key = Sha256::new();
        key.update(self.fingerprint);
        key.update(digest);
        key.finalize().into()
    }

    /// The entry's key for a component of these bytes (what its tag covers after the
    /// domain), for tests that forge entries.
    #[cfg(test)]
    pub(crate) fn entry_key(&self, bytes: &[u8]) -> [u8; 32] {
        self.key(bytes)
    }

    /// The cache file for a component of these bytes, if the cache is on.
    #[cfg(test)]
    pub(crate) fn entry(&self, bytes: &[u8]) -> Option<PathBuf> {
        let dir = self.dir.as_ref()?;
        Some(entry_path(&dir.path, &self.key(bytes)))
    }

    /// The component for `bytes` (read from `path`): from the cache when there is an
    /// authentic entry, else compiled and stored. An entry that is not authentic is
    /// deleted (and logged); a cache that cannot be read or written is logged and
    /// skipped, never an error.
    ///
    /// # Errors
    /// [`PluginErrorKind::Compile`] when the bytes do not compile.
    #[cfg(test)]
    pub(crate) fn load(
        &self,
        engine: &Engine,
        path: &Path,
        bytes: &[u8],
    ) -> Result<(Component, CompileSource), PluginError> {
        self.load_into(engine, path, bytes, &content_hash(bytes), None)
    }

    /// [`load`](Self::load) into `engine`: compiled, or read from the cache. `digest` is
    /// the [`content_hash`] of `bytes`: the entry's key is made from it. (The other engine shards of a backend load the
    /// component from its artifact when a call first needs it there.)
    ///
    /// With a `quick` engine ([`crate::engine::build_quick`]), a miss is compiled there
    /// instead, loaded into `engine`, and not stored
    /// ([`CompileSource::Quick`]): the caller compiles the optimized code later.
    ///
    /// # Errors
    /// [`PluginErrorKind::Compile`] when the bytes do not compile, or the compiled artifact
    /// does not load into `engine`.
    pub(crate) fn load_into(
        &self,
        engine: &Engine,
        path: &Path,
        bytes: &[u8],
        digest: &[u8; 32],
        quick: Option<&Engine>,
    ) -> Result<(Component, CompileSource), PluginError> {
        let started = Instant::now();
        let cached = self.dir.as_ref().map(|dir| {
            let key = self.key_of(digest);
            (dir, key, entry_path(&dir.path, &key))
        });
        if let Some((dir, key, file)) = &cached {
            match read_entry(engine, dir, key, file) {
                Ok(component) => {
                    return Ok((component, CompileSource::CacheHit(started.elapsed())))
                }
                Err(Miss::Absent) => {}
                Err(Miss::Rejected(reason)) => {
                    tracing::warn!(
                        target: "plugin",
                        cache = %file.display(),
                        "{}: compile cache entry rejected ({reason}); deleting it and recompiling",
                        path.display(),
                    );
                    let _ = std::fs::remove_file(file);
                }
            }
        }
        // A large component (a Python one is ~18 MB) takes a while to compile: say so
        // before, so a slow first start is not mistaken for a hang.
        let compile_error = |err: wasmtime::Error| {
            PluginErrorKind::Compile {
                message: error_chain(&err),
            }
            .at(path.to_owned())
        };
        if let Some(quick) = quick {
            tracing::info!(
                target: "plugin",
                "{}: compiling quick code for the component ({}; first load; optimized code follows from the background) ...",
                path.display(),
                toolhost::registry::format_bytes(bytes.len() as u64),
            );
            let artifact = quick.precompile_component(bytes).map_err(compile_error)?;
            let component = deserialize(engine, &artifact).map_err(compile_error)?;
            return Ok((component, CompileSource::Quick(started.elapsed())));
        }
        tracing::info!(
            target: "plugin",
            "{}: compiling the component ({}; first load{}) ...",
            path.display(),
            toolhost::registry::format_bytes(bytes.len() as u64),
            if self.dir.is_some() { ", cached for the next start" } else { ", the compile cache is off" },
        );
        let component = Component::new(engine, bytes).map_err(compile_error)?;
        let compiled = CompileSource::Compiled(started.elapsed());
        // The artifact, for the cache.
        if let Some((dir, key, file)) = cached {
            let artifact = component.serialize().map_err(compile_error)?;
            if let Err(message) = store(&artifact, dir, &key, &file) {
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

/// The hash a component's bytes are known by in the cache (its entry's key) and within a
/// load (one component under several names is compiled once): BLAKE3, collision-resistant
/// as SHA-256 is (128 bits) and several times faster, so a warm start over hundreds of
/// plugins does not spend its time hashing. (The lock file's pins stay SHA-256, the OCI
/// digest; they are computed only when there is a lock to check.)
pub(crate) fn content_hash(bytes: &[u8]) -> [u8; 32] {
    *blake3::hash(bytes).as_bytes()
}

fn entry_path(dir: &Path, key: &[u8; 32]) -> PathBuf {
    let hex: String = key.iter().map(|b| format!("{b:02x}")).collect();
    dir.join(format!("{hex}.cwasm"))
}

/// The tag of an entry with this key and artifact: keyed BLAKE3 under the cache's key
/// over the domain, the entry's key and the artifact (the domain and the entry's key have
/// fixed lengths, so no two inputs run together into the same bytes).
fn tag(dir: &CacheDir, key: &[u8; 32], artifact: &[u8]) -> blake3::Hash {
    let mut mac = blake3::Hasher::new_keyed(&dir.key);
    mac.update(TAG_DOMAIN);
    mac.update(key);
    mac.update(artifact);
    mac.finalize()
}

/// Reads the entry `file` into memory once, checks its tag over those bytes, and only
/// then deserialises the artifact from the same buffer: nothing that changes the file
/// after the check reaches the engine.
fn read_entry(
    engine: &Engine,
    dir: &CacheDir,
    key: &[u8; 32],
    file: &Path,
) -> Result<Component, Miss> {
    let bytes = read_bounded(file).map_err(|err| match err.kind() {
        io::ErrorKind::NotFound => Miss::Absent,
        _ => Miss::Rejected(format!("cannot read it: {err}")),
    })?;
    let header = MAGIC.len() + TAG_LEN;
    if bytes.len() < header || bytes[..MAGIC.len()] != MAGIC[..] {
        return Err(Miss::Rejected(
            "it is not an authenticated entry (truncated, or from another version)".into(),
        ));
    }
    let (tag_bytes, artifact) = bytes[MAGIC.len()..].split_at(TAG_LEN);
    // `Hash`'s equality is constant-time.
    let stored = <[u8; TAG_LEN]>::try_from(tag_bytes).map(blake3::Hash::from_bytes);
    if stored.ok() != Some(tag(dir, key, artifact)) {
        return Err(Miss::Rejected(
            "its authentication tag does not match: it was changed, cut short or not written by this cache"
                .into(),
        ));
    }
    deserialize(engine, artifact).map_err(|err| Miss::Rejected(error_chain(&err)))
}

/// The whole of `file`, read through one handle that does not follow a link, if it is a
/// regular file of at most [`MAX_ENTRY_BYTES`] (checked on the open handle; the read is
/// bounded too, so a file growing meanwhile cannot pass the cap).
fn read_bounded(file: &Path) -> io::Result<Vec<u8>> {
    let handle = dir::open_no_follow(file)?;
    let metadata = handle.metadata()?;
    if !metadata.is_file() {
        return Err(io::Error::other("it is not a regular file"));
    }
    let too_large = || {
        io::Error::other(format!(
            "it is larger than the {MAX_ENTRY_BYTES}-byte cap on cache entries"
        ))
    };
    if metadata.len() > MAX_ENTRY_BYTES {
        return Err(too_large());
    }
    let mut bytes = Vec::new();
    let expected = usize::try_from(metadata.len()).map_err(|_| too_large())?;
    bytes
        .try_reserve_exact(expected)
        .map_err(|err| io::Error::other(format!("cannot allocate {expected} bytes: {err}")))?;
    handle.take(MAX_ENTRY_BYTES + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_ENTRY_BYTES {
        return Err(too_large());
    }
    Ok(bytes)
}

/// Deserialises an authenticated artifact, or one this process just serialised.
#[allow(
    unsafe_code,
    reason = "Component::deserialize of bytes this process serialised or whose keyed BLAKE3 tag was just checked; see SAFETY"
)]
pub(crate) fn deserialize(engine: &Engine, artifact: &[u8]) -> wasmtime::Result<Component> {
    // SAFETY: `Component::deserialize` trusts `artifact` to be an artifact produced by
    // wasmtime (it becomes native code). These bytes are. Either `load_into`, or the
    // loader's shard preparation (`PrepareShard`), just made them with
    // `Component::serialize` of a component of this process (held in memory, never
    // written or read back), to load it into another engine configured alike; or
    // `load_into` just made them with `Engine::precompile_component` of this process's
    // quick engine (held in memory, never written or read back; it compiles the same
    // code with settings wasmtime's compatibility check ignores, and that check runs on
    // them too); or their keyed BLAKE3 tag was
    // checked, just before, over these very bytes (held in memory, not re-read), under
    // the cache's secret key, which only `store` uses, on the output of
    // `Component::serialize`. The tag also covers the entry's key (the hash of the
    // component's bytes and the engine's fingerprint), so an entry is only loaded for the
    // component and engine configuration it was compiled for; wasmtime checks the header
    // and compatibility again. The key file and the directory belong to this user, may be
    // written by no one else, and lie outside every storage root (`dir::open`), so neither
    // the model's tools nor a plugin can reach them.
    unsafe { Component::deserialize(engine, artifact) }
}

/// Writes a compiled component's `artifact`, authenticated, to `file` atomically, `0600`.
fn store(artifact: &[u8], dir: &CacheDir, key: &[u8; 32], file: &Path) -> Result<(), String> {
    if artifact.len() as u64 + (MAGIC.len() + TAG_LEN) as u64 > MAX_ENTRY_BYTES {
        return Err(format!(
            "the compiled artifact ({} bytes) is above the {MAX_ENTRY_BYTES}-byte cap on cache entries",
            artifact.len()
        ));
    }
    let tag = tag(dir, key, artifact);
    let name = file
        .file_name()
        .and_then(|name| name.to_str())
        .unwrap_or("entry");
    let temp = dir::temp_path(&dir.path, name);
    let result = dir::create_private_file(&temp)
        .and_then(|mut out| {
            out.write_all(MAGIC)?;
            out.write_all(tag.as_bytes())?;
            out.write_all(artifact)
        })
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
        super::super::engine::build(
            &super::super::PluginHostConfig {
                cache_dir: None,
                max_concurrent_calls: 1,
                ..Default::default()
            },
            crate::engine::Metering::EpochOnly,
        )
        .unwrap()
    }

    fn open(dir: &Path, engine: &Engine) -> CompileCache {
        CompileCache::open(Some(dir), &[], engine).unwrap()
    }

    #[test]
    fn second_load_is_a_cache_hit() {
        let dir = tempfile::tempdir().unwrap();
        let engine = engine();
        let cache = open(dir.path(), &engine);
        let path = Path::new("empty.wasm");
        let (_, first) = cache.load(&engine, path, EMPTY_COMPONENT).unwrap();
        assert!(matches!(first, CompileSource::Compiled(_)), "{first:?}");
        let entry = cache.entry(EMPTY_COMPONENT).unwrap();
        assert!(entry.is_file());
        let mut names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(
            names,
            [entry.file_name().unwrap().to_str().unwrap(), dir::KEY_FILE],
            "no temp file left"
        );
        let (_, second) = cache.load(&engine, path, EMPTY_COMPONENT).unwrap();
        assert!(matches!(second, CompileSource::CacheHit(_)), "{second:?}");
    }

    #[test]
    fn a_corrupt_entry_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let engine = engine();
        let cache = open(dir.path(), &engine);
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
    fn an_entry_made_under_another_key_is_rejected() {
        let engine = engine();
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let (first, second) = (open(a.path(), &engine), open(b.path(), &engine));
        first
            .load(&engine, Path::new("e.wasm"), EMPTY_COMPONENT)
            .unwrap();
        // The same component, the same engine, a whole entry: but another cache's key.
        std::fs::copy(
            first.entry(EMPTY_COMPONENT).unwrap(),
            second.entry(EMPTY_COMPONENT).unwrap(),
        )
        .unwrap();
        let (_, source) = second
            .load(&engine, Path::new("e.wasm"), EMPTY_COMPONENT)
            .unwrap();
        assert!(matches!(source, CompileSource::Compiled(_)), "{source:?}");
    }

    #[test]
    fn an_entry_that_is_a_link_or_too_large_is_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let engine = engine();
        let cache = open(dir.path(), &engine);
        cache
            .load(&engine, Path::new("e.wasm"), EMPTY_COMPONENT)
            .unwrap();
        let entry = cache.entry(EMPTY_COMPONENT).unwrap();
        let good = dir.path().join("good");
        std::fs::rename(&entry, &good).unwrap();
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(&good, &entry).unwrap();
            let err = read_bounded(&entry).unwrap_err();
            assert_eq!(err.raw_os_error(), Some(40), "ELOOP: {err}");
            std::fs::remove_file(&entry).unwrap();
        }
        let file = std::fs::File::create(&entry).unwrap();
        file.set_len(MAX_ENTRY_BYTES + 1).unwrap();
        let err = read_bounded(&entry).unwrap_err();
        assert_eq!(
            err.to_string(),
            "it is larger than the 1073741824-byte cap on cache entries"
        );
        let (_, source) = cache
            .load(&engine, Path::new("e.wasm"), EMPTY_COMPONENT)
            .unwrap();
        assert!(matches!(source, CompileSource::Compiled(_)), "{source:?}");
        assert_eq!(
            std::fs::metadata(&entry).unwrap().len(),
            std::fs::metadata(&good).unwrap().len(),
            "replaced by a good entry"
        );
    }

    #[test]
    fn keys_depend_on_content_and_engine() {
        let engine = engine();
        let cache = CompileCache::open(None, &[], &engine).unwrap();
        assert_ne!(cache.key(b"a"), cache.key(b"b"));
        let other = Engine::default();
        assert_ne!(
            cache.key(b"a"),
            CompileCache::open(None, &[], &other).unwrap().key(b"a")
        );
        assert_eq!(cache.entry(b"a"), None);
    }

    #[test]
    fn compile_errors_name_the_file() {
        let engine = engine();
        let cache = CompileCache::open(None, &[], &engine).unwrap();
        let err = cache
            .load(&engine, Path::new("bad.wasm"), b"\0asm\x0d\0\x01\0\xff")
            .unwrap_err();
        assert!(matches!(err.kind(), PluginErrorKind::Compile { .. }));
        assert!(
            err.to_string()
                .starts_with("bad.wasm: the component does not compile: "),
            "{err}"
        );
    }
}
