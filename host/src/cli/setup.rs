//! The one function that builds the registry from the flags, shared by `run`, `tools`
//! and `call`.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{bail, Context};
use tracing::info;

use crate::registry::Registry;
use crate::tools::{register_plan_tool, register_vfs_tools, VfsToolOptions};
use crate::vfs::{OsStorage, Storage};

use super::args::{PluginFiles, RegistryArgs};
use super::plugins;

/// A registry built from the flags, with what keeps its tools working.
pub struct Toolset {
    /// The tools, in the order offered to the model: the built-in file tools, the plan
    /// tool, then the plugins' tools.
    pub registry: Arc<Registry>,
    /// The directory the file tools (and granted plugins) work in, when it was opened.
    pub root: Option<PathBuf>,
    /// The plugin host whose instances run the plugin tools.
    _plugins: Option<plugins::Host>,
}

impl std::fmt::Debug for Toolset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Toolset")
            .field("registry", &self.registry)
            .field("root", &self.root)
            .finish_non_exhaustive()
    }
}

/// Builds the registry the flags describe: the built-in file tools over an
/// [`OsStorage`] at `--root` (unless `--no-builtins`), the plan tool with `--plan`, then
/// every plugin in `--plugins`. The call timeout is `--timeout`.
///
/// A plugin that fails to load is logged and skipped; the others still load.
///
/// # Sandbox
/// Opening `--root` uses ambient authority, once: the file tools (and plugins granted file
/// access with `--plugin-files`) reach everything under it, and nothing else.
///
/// # Errors
/// When `--root` cannot be opened as a directory, `--plugins` is not a directory, a tool
/// name is taken twice among the built-ins, or the plugin host cannot start.
pub fn build_registry(args: &RegistryArgs) -> anyhow::Result<Toolset> {
    let registry = Registry::new().with_call_timeout(args.timeout);
    let wants_storage = !args.no_builtins || args.plugin_files != PluginFiles::None;
    let (storage, root) = if wants_storage {
        let storage = OsStorage::open(&args.root).with_context(|| {
            format!(
                "cannot open --root {}; pass an existing directory (it defaults to the current one)",
                args.root.display()
            )
        })?;
        let root = std::fs::canonicalize(&args.root).unwrap_or_else(|_| args.root.clone());
        (Some(Arc::new(storage) as Arc<dyn Storage>), Some(root))
    } else {
        (None, None)
    };
    let options = vfs_options(args, storage.clone());
    if let (false, Some(options)) = (args.no_builtins, &options) {
        register_vfs_tools(&registry, options.clone())
            .context("cannot register the built-in file tools")?;
        info!(
            root = %root.as_deref().unwrap_or(&args.root).display(),
            read_only = args.read_only,
            extended = !args.disable_extended,
            hide_hidden = args.hide_hidden,
            allowed_extensions = ?options.allowed_extensions,
            max_file_bytes = args.max_file_bytes,
            "built-in file tools registered"
        );
    }
    if args.plan {
        register_plan_tool(&registry).context("cannot register the plan tool")?;
    }
    let plugin_host = match &args.plugins {
        Some(dir) => {
            if !dir.is_dir() {
                bail!(
                    "--plugins {} is not a directory; pass the directory that holds the plugins' .wasm files",
                    dir.display()
                );
            }
            let policy = match &options {
                Some(options) => options.policy(),
                None => Default::default(),
            };
            let config = plugins::host_config(args, storage, policy)?;
            Some(plugins::load(dir, &registry, config)?)
        }
        None => None,
    };
    Ok(Toolset {
        registry: Arc::new(registry),
        root,
        _plugins: plugin_host,
    })
}

/// The file tools' options from the flags, over `storage`.
fn vfs_options(args: &RegistryArgs, storage: Option<Arc<dyn Storage>>) -> Option<VfsToolOptions> {
    storage.map(|storage| {
        let mut options = VfsToolOptions::new(storage);
        options.read_only = args.read_only;
        options.disable_extended = args.disable_extended;
        options.hide_hidden_paths = args.hide_hidden;
        options.allowed_extensions = args.allowed_extensions();
        options.maximum_file_bytes = args.max_file_bytes;
        options
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::Cli;
    use clap::Parser;

    fn args(extra: &[&str]) -> RegistryArgs {
        let cli = Cli::try_parse_from(["host", "tools"].iter().chain(extra)).unwrap();
        match cli.command {
            crate::cli::Command::Tools(tools) => tools.registry,
            _ => unreachable!(),
        }
    }

    #[test]
    fn builtins_in_spec_order_then_plan() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_str().unwrap();
        let set = build_registry(&args(&["--root", root, "--plan"])).unwrap();
        assert_eq!(
            set.registry.names(),
            [
                "read_file",
                "list_files",
                "write_file",
                "delete_file",
                "grep",
                "glob",
                "edit_file",
                "multi_edit",
                "move_file",
                "todo_write"
            ]
        );
        assert_eq!(set.root, Some(std::fs::canonicalize(dir.path()).unwrap()));
        let set = build_registry(&args(&["--root", root, "--read-only"])).unwrap();
        assert_eq!(
            set.registry.names(),
            ["read_file", "list_files", "grep", "glob"]
        );
        let set = build_registry(&args(&["--root", root, "--disable-extended"])).unwrap();
        assert_eq!(
            set.registry.names(),
            ["read_file", "list_files", "write_file", "delete_file"]
        );
    }

    #[test]
    fn no_builtins_opens_nothing() {
        let set = build_registry(&args(&[
            "--root",
            "/does/not/exist",
            "--no-builtins",
            "--plan",
        ]))
        .unwrap();
        assert_eq!(set.registry.names(), ["todo_write"]);
        assert_eq!(set.root, None);
    }

    #[test]
    fn timeout_reaches_the_registry() {
        let dir = tempfile::tempdir().unwrap();
        let set = build_registry(&args(&[
            "--root",
            dir.path().to_str().unwrap(),
            "--timeout",
            "250ms",
        ]))
        .unwrap();
        assert_eq!(
            set.registry.call_timeout(),
            std::time::Duration::from_millis(250)
        );
    }

    #[test]
    fn bad_root_and_plugins_dir() {
        let err = build_registry(&args(&["--root", "/does/not/exist"])).unwrap_err();
        assert!(
            format!("{err:#}")
                .starts_with("cannot open --root /does/not/exist; pass an existing directory"),
            "{err:#}"
        );
        let dir = tempfile::tempdir().unwrap();
        let err = build_registry(&args(&[
            "--root",
            dir.path().to_str().unwrap(),
            "--plugins",
            "/does/not/exist",
        ]))
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "--plugins /does/not/exist is not a directory; pass the directory that holds the plugins' .wasm files"
        );
    }
}
