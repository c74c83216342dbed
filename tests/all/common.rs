//! Building a registry of built-in tools plus a chosen set of plugins.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use toolhost::registry::{CallContext, Environment, Registry, ToolCall, ToolError};
use toolhost::tools::{register_vfs_tools, VfsToolOptions};
use toolhost::vfs::{OsStorage, Storage};
use toolhost_plugin::{FileAccess, LoadReport, PluginHost, PluginHostConfig, PluginLimits};

/// A registry with the file tools over a temporary root, and plugins loaded from a
/// temporary directory.
pub(crate) struct Setup {
    pub registry: Arc<Registry>,
    pub report: LoadReport,
    pub storage: Arc<dyn Storage>,
    pub _root: tempfile::TempDir,
    pub _plugins: tempfile::TempDir,
}

/// The compile cache shared by every test of this binary, so each plugin compiles once.
pub(crate) fn cache_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("plugin-cache")
}

/// Options for [`setup`].
pub(crate) struct Options {
    pub file_access: FileAccess,
    pub limits: PluginLimits,
    pub fresh_instance_per_call: bool,
    /// The tools plugins may call (`--plugin-tools`); none by default.
    pub plugin_tools: Option<toolhost_plugin::manifest::ToolNames>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            file_access: FileAccess::Read,
            limits: PluginLimits::default(),
            fresh_instance_per_call: true,
            plugin_tools: None,
        }
    }
}

/// Built-ins plus the plugins `names`, with `options`.
pub(crate) fn setup_with(names: &[&str], options: Options) -> Setup {
    let root = tempfile::tempdir().expect("root dir");
    let plugins = tempfile::tempdir().expect("plugins dir");
    toolhost_tests::install(plugins.path(), names).expect("install plugins");
    let storage: Arc<dyn Storage> = Arc::new(OsStorage::open(root.path()).expect("open root"));
    let registry = Arc::new(Registry::new());
    register_vfs_tools(&registry, VfsToolOptions::new(Arc::clone(&storage))).expect("built-ins");
    let host = PluginHost::new(
        PluginHostConfig::builder()
            .cache_dir(Some(cache_dir()))
            .default_limits(options.limits)
            .storage(Some(Arc::clone(&storage)))
            .max_file_access(options.file_access)
            .fresh_instance_per_call(options.fresh_instance_per_call)
            .plugin_tools(options.plugin_tools)
            .build(),
    )
    .expect("plugin host");
    let report = host.load_dir(plugins.path(), &registry);
    Setup {
        registry,
        report,
        storage,
        _root: root,
        _plugins: plugins,
    }
}

/// Built-ins plus the plugins `names`, default options (hosts allow read grants).
pub(crate) fn setup(names: &[&str]) -> Setup {
    setup_with(names, Options::default())
}

/// Limits with a short timeout, for the hostile cases.
pub(crate) fn short_limits(timeout: Duration) -> PluginLimits {
    PluginLimits::default().with_timeout(timeout)
}

impl Setup {
    /// Dispatches one call and returns the result content.
    pub(crate) async fn call(&self, tool: &str, arguments: &str) -> Result<Value, ToolError> {
        self.registry
            .dispatch(
                &CallContext::new(),
                &ToolCall::new(tool, arguments),
                &Environment::generate(),
            )
            .await
            .map(|result| result.content)
    }

    /// Asserts that greet still answers exactly.
    pub(crate) async fn assert_greet_works(&self) {
        assert_eq!(
            self.call("greet", r#"{"name":"Ada"}"#)
                .await
                .expect("greet after the failure"),
            Value::from("Hello, Ada!")
        );
    }
}
