//! The tools a session is offered: its registry brought in line with its principal's
//! profile (at set-up and on each reload), each tool offered wrapped to run under the
//! principal's quotas.

use std::sync::Arc;

use tracing::warn;

use toolhost::registry::{Handler, Registry, ToolDefinition};
use toolhost_mcp::policy::quota::PrincipalQuota;
use toolhost_mcp::policy::{Profile, ToolKind};

use super::ceilings::ProfilePlugins;
use super::quota_guard::guarded;

/// The built-in tools that change files.
const WRITING_TOOLS: [&str; 5] = [
    "write_file",
    "delete_file",
    "edit_file",
    "multi_edit",
    "move_file",
];

/// What kind of tool `name` of the session's own (built-in) registry is.
fn builtin_kind(name: &str) -> ToolKind<'static> {
    if name == "todo_write" {
        ToolKind::Other
    } else {
        ToolKind::File {
            writes: WRITING_TOOLS.contains(&name),
        }
    }
}

/// Brings `served` in line with `profile`: the tools it does not offer taken away, the
/// ones it offers and `served` lacks added (every plugin tool again when `replaced`:
/// its plugins were loaded anew).
pub(super) fn sync(
    served: &Registry,
    files: &Arc<Registry>,
    plugins: &ProfilePlugins,
    profile: &Profile,
    quota: &Arc<PrincipalQuota>,
    replaced: bool,
) {
    let plugin_registry = &plugins.toolset.registry;
    let mut builtins: Vec<ToolDefinition> = Vec::new();
    let mut outside: Vec<ToolDefinition> = Vec::new();
    for definition in files.definitions() {
        if profile.offers(&definition.name, builtin_kind(&definition.name)) {
            builtins.push(definition);
        }
    }
    for definition in plugin_registry.definitions() {
        let plugin = plugins
            .plugin_of
            .get(&definition.name)
            .map_or("", String::as_str);
        if profile.offers(&definition.name, ToolKind::Plugin(plugin)) {
            outside.push(definition);
        }
    }
    let wanted = |name: &str| builtins.iter().chain(&outside).any(|d| d.name == name);
    let remove: Vec<String> = served
        .names()
        .into_iter()
        .filter(|name| !wanted(name) || (replaced && !files.has(name)))
        .collect();
    served.withdraw(&remove);
    for definition in builtins {
        if !served.has(&definition.name) {
            let handler = guarded(
                Arc::clone(files),
                definition.name.clone(),
                Arc::clone(quota),
            );
            if let Err(err) = served.register_builtin(definition, handler) {
                warn!("cannot offer a built-in tool to a session: {err}");
            }
        }
    }
    let added: Vec<(ToolDefinition, Arc<dyn Handler>)> = outside
        .into_iter()
        .filter(|definition| !served.has(&definition.name))
        .map(|definition| {
            let handler: Arc<dyn Handler> = Arc::new(guarded(
                Arc::clone(plugin_registry),
                definition.name.clone(),
                Arc::clone(quota),
            ));
            (definition, handler)
        })
        .collect();
    if !added.is_empty() {
        if let Err(err) = served.register_all(added) {
            warn!("cannot offer a plugin's tools to a session: {err}");
        }
    }
}
