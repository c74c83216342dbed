//! The test plugins, built from `plugins/` by `build.rs` for `wasm32-wasip2`.
//!
//! Each plugin has a path constant named after it (`GREET`, `HOSTILE_LOOP`, ...) and an
//! entry in [`PLUGINS`]. Tests load plugins from a directory, so [`install`] copies a
//! chosen set (each `NAME.wasm` with its `NAME.toml` manifest, if it has one) into one:
//!
//! ```no_run
//! let dir = tempfile::tempdir()?;
//! toolhost_tests::install(dir.path(), &["greet", "divide", "wordcount"])?;
//! assert!(dir.path().join("wordcount.toml").is_file());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(missing_docs)]

use std::io;
use std::path::Path;

include!(concat!(env!("OUT_DIR"), "/plugins.rs"));

/// What a plugin is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Shipped to users (greet, divide, wordcount, webfetch).
    Example,
    /// A loader test case that behaves (multi, dupname, wrong_world, metadata).
    Fixture,
    /// Misbehaves on purpose (`hostile_*`).
    Hostile,
}

/// One built plugin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plugin {
    /// Package name under `plugins/`, also the file stem (`greet` for `greet.wasm`).
    pub name: &'static str,
    /// What it is for.
    pub kind: Kind,
    /// Absolute path of the built component.
    pub wasm: &'static str,
    /// Absolute path of its manifest (`plugins/NAME/NAME.toml`), when it ships one.
    pub manifest: Option<&'static str>,
}

/// The plugin called `name`.
///
/// # Panics
///
/// When there is no such plugin (a typo in a test).
pub fn plugin(name: &str) -> &'static Plugin {
    PLUGINS
        .iter()
        .find(|plugin| plugin.name == name)
        .unwrap_or_else(|| {
            let known: Vec<&str> = PLUGINS.iter().map(|p| p.name).collect();
            panic!("no test plugin `{name}`; there are: {}", known.join(", "))
        })
}

/// The plugins of one kind, sorted by name.
pub fn of_kind(kind: Kind) -> impl Iterator<Item = &'static Plugin> {
    PLUGINS.iter().filter(move |plugin| plugin.kind == kind)
}

/// Copies the named plugins into `dir` as `NAME.wasm`, each with its manifest as
/// `NAME.toml` when it ships one.
///
/// # Errors
///
/// Any copy failure.
///
/// # Panics
///
/// On an unknown plugin name.
pub fn install(dir: &Path, names: &[&str]) -> io::Result<()> {
    for name in names {
        let plugin = plugin(name);
        install_wasm(dir, plugin)?;
        if let Some(manifest) = plugin.manifest {
            std::fs::copy(manifest, dir.join(format!("{name}.toml")))?;
        }
    }
    Ok(())
}

/// Copies the named plugins into `dir` as `NAME.wasm`, without their manifests (so they
/// get the host's defaults: no grant).
///
/// # Errors
///
/// Any copy failure.
///
/// # Panics
///
/// On an unknown plugin name.
pub fn install_without_manifests(dir: &Path, names: &[&str]) -> io::Result<()> {
    for name in names {
        install_wasm(dir, plugin(name))?;
    }
    Ok(())
}

fn install_wasm(dir: &Path, plugin: &Plugin) -> io::Result<()> {
    std::fs::copy(plugin.wasm, dir.join(format!("{}.wasm", plugin.name)))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_plugin_is_built_and_classified() {
        let names: Vec<&str> = PLUGINS.iter().map(|p| p.name).collect();
        assert_eq!(
            names,
            [
                "conformance",
                "divide",
                "dupname",
                "greet",
                "hostile_alloc",
                "hostile_ask",
                "hostile_badjson",
                "hostile_compose",
                "hostile_handles",
                "hostile_http",
                "hostile_imports",
                "hostile_loop",
                "hostile_output",
                "hostile_panic",
                "hostile_resources",
                "hostile_stack",
                "hostile_state",
                "hostile_stderr",
                "hostile_vfs_escape",
                "hostile_wasi_escape",
                "metadata",
                "multi",
                "rich",
                "texttools",
                "webfetch",
                "wordcount",
                "wrong_world",
            ]
        );
        for plugin in PLUGINS {
            let bytes = std::fs::read(plugin.wasm).unwrap();
            // A component: the wasm magic, then version 0x0d with layer 1.
            assert_eq!(&bytes[..8], b"\0asm\x0d\0\x01\0", "{}", plugin.name);
        }
        assert_eq!(GREET, plugin("greet").wasm);
        let examples: Vec<&str> = of_kind(Kind::Example).map(|p| p.name).collect();
        assert_eq!(examples, ["divide", "greet", "webfetch", "wordcount"]);
    }

    #[test]
    fn install_copies_wasm_and_manifests() {
        let dir = tempfile::tempdir().unwrap();
        install(dir.path(), &["greet", "wordcount"]).unwrap();
        let mut files: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        files.sort();
        assert_eq!(files, ["greet.wasm", "wordcount.toml", "wordcount.wasm"]);
        assert_eq!(
            std::fs::read_to_string(dir.path().join("wordcount.toml")).unwrap(),
            std::fs::read_to_string(plugin("wordcount").manifest.unwrap()).unwrap()
        );

        let bare = tempfile::tempdir().unwrap();
        install_without_manifests(bare.path(), &["wordcount"]).unwrap();
        assert!(bare.path().join("wordcount.wasm").is_file());
        assert!(!bare.path().join("wordcount.toml").exists());
    }
}
