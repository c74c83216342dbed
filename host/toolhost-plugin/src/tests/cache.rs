//! The compile cache against a writer that tampers with it and an operator who puts it
//! somewhere unsafe: entries are authenticated before they are deserialised, the files
//! are private, and a directory others can write is refused.

use std::os::unix::fs::PermissionsExt;

use super::*;
use crate::cache::{CacheError, Placement};

/// A fixture declaring one tool, `name`.
fn one_tool(name: &str) -> Vec<u8> {
    fixture::component(&[(name, fixture::EMPTY_SCHEMA)])
}

fn caching(dir: &Path) -> PluginHostConfig {
    PluginHostConfig {
        cache_dir: Some(dir.to_owned()),
        ..config()
    }
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// Loads `wasm` with a fresh host over `cache`: how it was obtained, and the tools it
/// registered.
fn load(cache: &Path, wasm: &Path) -> (CompileSource, Vec<String>) {
    let registry = Registry::new();
    let plugin = PluginHost::new(caching(cache))
        .unwrap()
        .load_file(wasm, &registry)
        .unwrap();
    (plugin.compile, registry.names())
}

/// Two plugins, `alpha.wasm` (tool `alpha`) and `beta.wasm` (tool `beta`), both loaded
/// once through `cache`, so each has an entry; with their entry files.
fn alpha_and_beta(cache: &Path) -> (tempfile::TempDir, PathBuf, PathBuf, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let alpha = dir.path().join("alpha.wasm");
    let beta = dir.path().join("beta.wasm");
    std::fs::write(&alpha, one_tool("alpha")).unwrap();
    std::fs::write(&beta, one_tool("beta")).unwrap();
    assert!(matches!(load(cache, &alpha).0, CompileSource::Compiled(_)));
    assert!(matches!(load(cache, &beta).0, CompileSource::Compiled(_)));
    let host = PluginHost::new(caching(cache)).unwrap();
    let alpha_entry = host.plain.cache.entry(&one_tool("alpha")).unwrap();
    let beta_entry = host.plain.cache.entry(&one_tool("beta")).unwrap();
    assert!(alpha_entry.is_file() && beta_entry.is_file());
    (dir, alpha, beta, alpha_entry, beta_entry)
}

#[test]
fn an_entry_holding_another_components_artifact_is_not_loaded() {
    let cache = tempfile::tempdir().unwrap();
    let (_dir, alpha, _beta, alpha_entry, beta_entry) = alpha_and_beta(cache.path());

    // A whole, valid entry of another component copied over alpha's: what a writer of
    // the cache directory with no key can make.
    std::fs::copy(&beta_entry, &alpha_entry).unwrap();
    let (source, tools) = load(cache.path(), &alpha);
    assert!(matches!(source, CompileSource::Compiled(_)), "{source:?}");
    assert_eq!(tools, ["alpha"], "the tampered entry ran");
    assert_ne!(
        std::fs::read(&alpha_entry).unwrap(),
        std::fs::read(&beta_entry).unwrap(),
        "the tampered entry was replaced"
    );

    // A bare wasmtime artifact of the other component (the format entries had before
    // they were authenticated).
    let engine = PluginHost::new(config()).unwrap().engine().clone();
    let artifact = wasmtime::component::Component::new(&engine, one_tool("beta"))
        .unwrap()
        .serialize()
        .unwrap();
    std::fs::write(&alpha_entry, &artifact).unwrap();
    let (source, tools) = load(cache.path(), &alpha);
    assert!(matches!(source, CompileSource::Compiled(_)), "{source:?}");
    assert_eq!(tools, ["alpha"], "the bare artifact ran");

    // The entry written in its place is a good one.
    let (source, tools) = load(cache.path(), &alpha);
    assert!(matches!(source, CompileSource::CacheHit(_)), "{source:?}");
    assert_eq!(tools, ["alpha"]);
}

#[test]
fn a_flipped_byte_or_a_truncated_entry_is_recompiled() {
    let cache = tempfile::tempdir().unwrap();
    let (_dir, alpha, _beta, alpha_entry, _) = alpha_and_beta(cache.path());
    let good = std::fs::read(&alpha_entry).unwrap();

    // One byte of the compiled code changed: still a well-formed artifact for wasmtime.
    let mut flipped = good.clone();
    let middle = flipped.len() / 2;
    flipped[middle] ^= 0x01;
    std::fs::write(&alpha_entry, &flipped).unwrap();
    let (source, tools) = load(cache.path(), &alpha);
    assert!(matches!(source, CompileSource::Compiled(_)), "{source:?}");
    assert_eq!(tools, ["alpha"]);
    assert_eq!(std::fs::read(&alpha_entry).unwrap(), good, "rewritten");

    std::fs::write(&alpha_entry, &good[..good.len() / 2]).unwrap();
    let (source, _) = load(cache.path(), &alpha);
    assert!(matches!(source, CompileSource::Compiled(_)), "{source:?}");
    assert_eq!(std::fs::read(&alpha_entry).unwrap(), good, "rewritten");

    std::fs::write(&alpha_entry, b"").unwrap();
    let (source, _) = load(cache.path(), &alpha);
    assert!(matches!(source, CompileSource::Compiled(_)), "{source:?}");
}

#[test]
fn cache_directories_are_created_0700_and_files_0600() {
    let parent = tempfile::tempdir().unwrap();
    let cache = parent.path().join("new").join("cache");
    let (_dir, wasm) = plugin_dir(None);
    assert!(matches!(load(&cache, &wasm).0, CompileSource::Compiled(_)));
    assert_eq!(mode(&cache), 0o700, "the cache directory");
    assert_eq!(
        mode(&parent.path().join("new")),
        0o700,
        "a directory created on the way"
    );
    let mut names = Vec::new();
    for entry in std::fs::read_dir(&cache).unwrap() {
        let entry = entry.unwrap();
        assert_eq!(mode(&entry.path()), 0o600, "{}", entry.path().display());
        names.push(entry.file_name().to_string_lossy().into_owned());
    }
    names.sort();
    assert_eq!(
        names.len(),
        2,
        "one entry and the key, no temp file: {names:?}"
    );
    assert!(names[0].ends_with(".cwasm"), "{names:?}");
    assert_eq!(names[1], "hmac-key");
}

#[test]
fn a_cache_dir_writable_by_group_or_others_is_refused() {
    for bits in [0o770, 0o707, 0o777, 0o720] {
        let cache = tempfile::tempdir().unwrap();
        chmod(cache.path(), bits);
        let err = PluginHost::new(caching(cache.path())).unwrap_err();
        assert_eq!(err.name(), "cache", "{err:?}");
        assert!(
            matches!(err.kind(), PluginErrorKind::Cache(CacheError::Writable { mode, .. }) if *mode == bits),
            "{err:?}"
        );
        let text = err.to_string();
        let path = cache.path().canonicalize().unwrap();
        assert_eq!(err.path(), Some(path.as_path()));
        assert!(
            text.contains(&format!(
                "{} is writable by its group or by others (mode {bits:o})",
                path.display()
            )),
            "{text}"
        );
        assert!(
            text.contains(&format!("chmod 700 {}", path.display())),
            "{text}"
        );
        assert!(text.contains("--cache-dir"), "{text}");
    }
    // Readable by others is fine: the key is 0600 itself.
    let cache = tempfile::tempdir().unwrap();
    chmod(cache.path(), 0o755);
    assert!(PluginHost::new(caching(cache.path())).is_ok());
}

/// Whether this process can give a file away (it runs as root). The tests that need it
/// skip, saying so on stderr, where it cannot; with `TOOLHOST_REQUIRE_ROOT` set (as
/// `scripts/test` sets it when it runs as root) they fail instead, so a run that should
/// cover the owner check never passes without it.
fn chown_to_other_user(path: &Path) -> bool {
    match std::os::unix::fs::chown(path, Some(4242), Some(4242)) {
        Ok(()) => true,
        Err(err) if std::env::var_os("TOOLHOST_REQUIRE_ROOT").is_some() => panic!(
            "TOOLHOST_REQUIRE_ROOT is set but {} cannot be given to another user ({err}): run as root, or unset it",
            path.display()
        ),
        Err(err) => {
            eprintln!(
                "SKIPPED: cannot chown {} to another user ({err}); run the tests as root to cover the owner check",
                path.display()
            );
            false
        }
    }
}

#[test]
fn a_cache_dir_owned_by_another_user_is_refused() {
    let cache = tempfile::tempdir().unwrap();
    if !chown_to_other_user(cache.path()) {
        return;
    }
    let err = PluginHost::new(caching(cache.path())).unwrap_err();
    assert_eq!(err.name(), "cache", "{err:?}");
    assert!(
        matches!(
            err.kind(),
            PluginErrorKind::Cache(CacheError::NotOwned {
                owner: 4242,
                what: "the compile cache directory",
                ..
            })
        ),
        "{err:?}"
    );
    let text = err.to_string();
    let path = cache.path().canonicalize().unwrap();
    assert!(
        text.contains(&format!(
            "{} is owned by uid 4242, not by this user",
            path.display()
        )),
        "{text}"
    );
    assert!(text.contains("--cache-dir"), "{text}");
}

#[test]
fn a_key_file_others_can_read_or_own_is_refused() {
    let cache = tempfile::tempdir().unwrap();
    PluginHost::new(caching(cache.path())).unwrap();
    let key = cache.path().canonicalize().unwrap().join("hmac-key");
    assert_eq!(mode(&key), 0o600);
    chmod(&key, 0o640);
    let err = PluginHost::new(caching(cache.path())).unwrap_err();
    assert!(
        matches!(
            err.kind(),
            PluginErrorKind::Cache(CacheError::KeyNotPrivate { mode: 0o640, .. })
        ),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(
        text.contains(&format!(
            "{} can be read or written by its group or by others (mode 640)",
            key.display()
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!("chmod 600 {}", key.display())),
        "{text}"
    );

    chmod(&key, 0o600);
    if chown_to_other_user(&key) {
        let err = PluginHost::new(caching(cache.path())).unwrap_err();
        assert!(
            err.to_string().contains(&format!(
                "{} is owned by uid 4242, not by this user",
                key.display()
            )),
            "{err}"
        );
    }
}

#[test]
fn the_library_refuses_a_cache_inside_equal_to_or_above_a_storage_root() {
    let top = tempfile::tempdir().unwrap();
    let root = top.path().join("root");
    std::fs::create_dir(&root).unwrap();
    let storage = toolhost::vfs::OsStorage::open(&root).unwrap();
    let real_root = storage.root().to_owned();
    assert_eq!(real_root, root.canonicalize().unwrap());
    let real_top = top.path().canonicalize().unwrap();
    // A second root the cache has nothing to do with: the first match is reported.
    let elsewhere = tempfile::tempdir().unwrap();
    for (cache, shown, placement) in [
        (
            root.join("cache"),
            real_root.join("cache"),
            Placement::Inside,
        ),
        (
            root.join("a").join("b"),
            real_root.join("a").join("b"),
            Placement::Inside,
        ),
        (root.clone(), real_root.clone(), Placement::Same),
        (top.path().to_owned(), real_top, Placement::Parent),
    ] {
        let err = PluginHost::new(PluginHostConfig {
            cache_dir: Some(cache.clone()),
            storage_roots: vec![elsewhere.path().to_owned(), storage.root().to_owned()],
            storage: Some(std::sync::Arc::new(toolhost::vfs::MemoryStorage::new())),
            ..config()
        })
        .unwrap_err();
        let PluginErrorKind::Cache(CacheError::InsideRoot {
            cache: got_cache,
            root: got_root,
            placement: got,
        }) = err.kind()
        else {
            panic!("{}: {err:?}", cache.display())
        };
        assert_eq!(
            (got_cache, got_root, *got),
            (&shown, &real_root, placement),
            "{err}"
        );
        assert!(
            err.to_string().starts_with(&format!(
                "the compile cache directory {} is {placement} the storage root {}: ",
                shown.display(),
                real_root.display()
            )),
            "{err}"
        );
    }
    assert!(
        !root.join("cache").exists() && !root.join("a").exists(),
        "nothing created"
    );
    // Beside the root: fine, and created.
    let beside = top.path().join("cache");
    PluginHost::new(PluginHostConfig {
        cache_dir: Some(beside.clone()),
        storage_roots: vec![storage.root().to_owned()],
        ..config()
    })
    .unwrap();
    assert!(beside.join("hmac-key").is_file());
}

#[test]
fn a_cache_dir_that_is_a_file_or_a_key_that_is_a_link_is_refused() {
    let top = tempfile::tempdir().unwrap();
    let file = top.path().join("file");
    std::fs::write(&file, b"x").unwrap();
    let err = PluginHost::new(caching(&file)).unwrap_err();
    assert!(
        matches!(
            err.kind(),
            PluginErrorKind::Cache(CacheError::WrongType {
                expected: "directory",
                ..
            })
        ),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        format!(
            "{} is not a directory; remove it or choose another --cache-dir",
            file.display()
        )
    );

    let cache = top.path().join("cache");
    PluginHost::new(caching(&cache)).unwrap();
    let key = cache.canonicalize().unwrap().join("hmac-key");
    std::fs::rename(&key, top.path().join("stolen")).unwrap();
    std::os::unix::fs::symlink(top.path().join("stolen"), &key).unwrap();
    let err = PluginHost::new(caching(&cache)).unwrap_err();
    assert!(
        matches!(
            err.kind(),
            PluginErrorKind::Cache(CacheError::WrongType {
                expected: "regular file",
                ..
            })
        ),
        "{err:?}"
    );
}

#[test]
fn a_key_of_the_wrong_size_is_replaced_and_every_entry_recompiles() {
    let cache = tempfile::tempdir().unwrap();
    let (_dir, wasm) = plugin_dir(None);
    assert!(matches!(
        load(cache.path(), &wasm).0,
        CompileSource::Compiled(_)
    ));
    assert!(matches!(
        load(cache.path(), &wasm).0,
        CompileSource::CacheHit(_)
    ));
    let key = cache.path().join("hmac-key");
    std::fs::write(&key, b"short").unwrap();
    assert!(matches!(
        load(cache.path(), &wasm).0,
        CompileSource::Compiled(_)
    ));
    assert_eq!(std::fs::metadata(&key).unwrap().len(), 32);
    assert_eq!(mode(&key), 0o600);
    assert!(matches!(
        load(cache.path(), &wasm).0,
        CompileSource::CacheHit(_)
    ));
}

/// The parts of a forged entry of `artifact` in alpha's place: the cache's own key (read
/// from its key file) and alpha's entry key.
fn cache_and_entry_keys(cache: &Path) -> ([u8; 32], [u8; 32]) {
    let key: [u8; 32] = std::fs::read(cache.canonicalize().unwrap().join("hmac-key"))
        .unwrap()
        .try_into()
        .unwrap();
    let host = PluginHost::new(caching(cache)).unwrap();
    (key, host.plain.cache.entry_key(&one_tool("alpha")))
}

/// `magic`, `tag` and `artifact`: an entry as the cache lays it out.
fn entry_of(magic: &[u8], tag: &[u8], artifact: &[u8]) -> Vec<u8> {
    [magic, tag, artifact].concat()
}

#[test]
fn an_entry_of_the_hmac_format_is_recompiled_not_trusted() {
    use hmac::Mac;
    let cache = tempfile::tempdir().unwrap();
    let (_dir, alpha, _beta, alpha_entry, _) = alpha_and_beta(cache.path());
    let (key, entry_key) = cache_and_entry_keys(cache.path());
    let artifact = &std::fs::read(&alpha_entry).unwrap()[8 + 32..];
    // A genuine entry of the former format (an HMAC-SHA256 tag under this cache's key):
    // the format is no longer trusted at all, so it is compiled again, and rewritten.
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(&key).unwrap();
    mac.update(b"wasm-toolhost compile cache entry v1\0");
    mac.update(&entry_key);
    mac.update(artifact);
    let tag = mac.finalize().into_bytes();
    std::fs::write(&alpha_entry, entry_of(b"wthc\0\0\0\x01", &tag, artifact)).unwrap();
    let (source, tools) = load(cache.path(), &alpha);
    assert!(matches!(source, CompileSource::Compiled(_)), "{source:?}");
    assert_eq!(tools, ["alpha"]);
    assert_eq!(
        &std::fs::read(&alpha_entry).unwrap()[..8],
        b"wthc\0\0\0\x02",
        "rewritten in the current format"
    );
}

#[test]
fn an_entry_tagged_without_the_cache_key_is_not_loaded() {
    let cache = tempfile::tempdir().unwrap();
    let (_dir, alpha, _beta, alpha_entry, beta_entry) = alpha_and_beta(cache.path());
    let (key, entry_key) = cache_and_entry_keys(cache.path());
    // Beta's code in alpha's place, tagged as the cache tags, by a writer who lacks the
    // key: with an unkeyed BLAKE3 hash, and under another key.
    let beta_artifact = std::fs::read(&beta_entry).unwrap()[8 + 32..].to_vec();
    let tagged = |hasher: blake3::Hasher| {
        let mut hasher = hasher;
        hasher.update(b"wasm-toolhost compile cache entry v2\0");
        hasher.update(&entry_key);
        hasher.update(&beta_artifact);
        hasher.finalize()
    };
    let mut other_key = key;
    other_key[0] ^= 1;
    for forged in [
        tagged(blake3::Hasher::new()),
        tagged(blake3::Hasher::new_keyed(&other_key)),
    ] {
        std::fs::write(
            &alpha_entry,
            entry_of(b"wthc\0\0\0\x02", forged.as_bytes(), &beta_artifact),
        )
        .unwrap();
        let (source, tools) = load(cache.path(), &alpha);
        assert!(matches!(source, CompileSource::Compiled(_)), "{source:?}");
        assert_eq!(tools, ["alpha"], "the forged entry ran");
    }
    // The same layout tagged under the cache's key is what the cache writes: it loads
    // (so the forgeries above fail only for want of the key).
    let alpha_artifact = std::fs::read(&alpha_entry).unwrap()[8 + 32..].to_vec();
    let mut genuine = blake3::Hasher::new_keyed(&key);
    genuine.update(b"wasm-toolhost compile cache entry v2\0");
    genuine.update(&entry_key);
    genuine.update(&alpha_artifact);
    assert_eq!(
        std::fs::read(&alpha_entry).unwrap(),
        entry_of(
            b"wthc\0\0\0\x02",
            genuine.finalize().as_bytes(),
            &alpha_artifact
        )
    );
    let (source, tools) = load(cache.path(), &alpha);
    assert!(matches!(source, CompileSource::CacheHit(_)), "{source:?}");
    assert_eq!(tools, ["alpha"]);
}
