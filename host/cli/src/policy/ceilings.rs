//! A profile's plugin ceilings: the operator's plugin flags (`--plugin-http`, memory,
//! time, config) narrowed by them, never widened, and the plugins loaded under each
//! set of ceilings, once (profiles with the same ceilings share them).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use toolhost_mcp::policy::Profile;

use super::{invalid, lock, Policed};
use crate::args::RegistryArgs;
use crate::setup::{build_server_registry, Toolset};

/// Plugin defaults the ceilings narrow when the operator set none (as `RegistryArgs`'
/// help says): 64 MiB, 10 s.
const DEFAULT_PLUGIN_MEMORY: u64 = 64 << 20;
const DEFAULT_PLUGIN_TIMEOUT: Duration = Duration::from_secs(10);

/// The plugins of one set of grant ceilings, loaded once, and which plugin each tool
/// is of.
pub(super) struct ProfilePlugins {
    pub(super) toolset: Toolset,
    pub(super) plugin_of: HashMap<String, String>,
}

impl Policed {
    /// The operator's flags narrowed by `profile`'s plugin ceilings (plugins only).
    pub(super) fn narrowed(&self, profile: &Profile) -> anyhow::Result<RegistryArgs> {
        let mut args = self.args.clone();
        args.no_builtins = true;
        args.plan = false;
        let ceilings = profile.plugin();
        if let Some(hosts) = &ceilings.http {
            let mut kept = Vec::new();
            for host in hosts {
                let pattern: toolhost_plugin::http_policy::HostPattern = host.parse().map_err(
                    |err: toolhost_plugin::http_policy::HostPatternError| {
                        invalid(profile, "plugin.http", &err.to_string())
                    },
                )?;
                if !self
                    .args
                    .plugin_http
                    .iter()
                    .any(|allowed| allowed.to_string() == pattern.to_string())
                {
                    return Err(invalid(
                        profile,
                        "plugin.http",
                        &format!("{pattern} is not a host the operator allows (--plugin-http); a profile may only narrow them"),
                    )
                    .into());
                }
                kept.push(pattern);
            }
            args.plugin_http = kept;
        }
        if let Some(memory) = ceilings.memory_bytes {
            let base = self.args.plugin_memory.unwrap_or(DEFAULT_PLUGIN_MEMORY);
            let max = self.args.plugin_max_memory.unwrap_or(base);
            args.plugin_memory = Some(base.min(memory));
            args.plugin_max_memory = Some(max.min(memory));
        }
        if let Some(timeout) = ceilings.timeout {
            let base = self.args.plugin_timeout.unwrap_or(DEFAULT_PLUGIN_TIMEOUT);
            let max = self.args.plugin_max_timeout.unwrap_or(base);
            args.plugin_timeout = Some(base.min(timeout));
            args.plugin_max_timeout = Some(max.min(timeout));
        }
        if let Some(config) = &ceilings.config {
            if self.args.plugin_config_file.is_some() {
                return Err(invalid(
                    profile,
                    "plugin.config",
                    "cannot narrow the values of --plugin-config-file; give them with --plugin-config or --plugin-config-env, or drop plugin.config",
                )
                .into());
            }
            let named = |entry: &String| {
                let key = entry.split_once('=').map_or(entry.as_str(), |(key, _)| key);
                config.iter().any(|allowed| allowed == key.trim())
            };
            args.plugin_config.retain(named);
            args.plugin_config_env.retain(named);
        }
        Ok(args)
    }

    /// The plugins loaded under `profile`'s ceilings (loaded once per set of ceilings).
    pub(super) fn plugins_for(&self, profile: &Profile) -> anyhow::Result<Arc<ProfilePlugins>> {
        let key = format!("{:?}", profile.plugin());
        if let Some(found) = lock(&self.plugins).get(&key) {
            return Ok(Arc::clone(found));
        }
        let toolset = build_server_registry(&self.narrowed(profile)?)?;
        let mut plugin_of = HashMap::new();
        if let Some(report) = toolset.load_report() {
            for plugin in &report.loaded {
                for tool in &plugin.tools {
                    plugin_of.insert(tool.clone(), plugin.name.clone());
                }
            }
        }
        let loaded = Arc::new(ProfilePlugins { toolset, plugin_of });
        Ok(Arc::clone(lock(&self.plugins).entry(key).or_insert(loaded)))
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::sync::Mutex;

    use toolhost_mcp::http::SessionRootTemplate;
    use toolhost_mcp::policy::{LivePolicy, Policy};

    use super::*;

    fn policed(flags: &[&str]) -> (tempfile::TempDir, Policed) {
        let base = tempfile::tempdir().unwrap();
        let template =
            SessionRootTemplate::parse(&format!("{}/{{client}}", base.path().display())).unwrap();
        let policed = Policed {
            live: Arc::new(LivePolicy::new(Policy::parse("[profile.x]\n").unwrap())),
            path: PathBuf::from("policy.toml"),
            args: crate::args::registry_args_from(flags).unwrap(),
            template,
            tools: Vec::new(),
            plugin_names: Vec::new(),
            plugins: Mutex::new(HashMap::new()),
            sessions: Mutex::new(Vec::new()),
        };
        (base, policed)
    }

    fn profile(text: &str) -> Profile {
        Policy::parse(text).unwrap().profile("p").unwrap().clone()
    }

    #[test]
    fn ceilings_only_narrow_the_operators_grants() {
        let (_base, policed) = policed(&[
            "--plugin-http",
            "api.example.org",
            "--plugin-http",
            "http://127.0.0.1:8080",
            "--plugin-memory",
            "32MiB",
            "--plugin-max-timeout",
            "20s",
            "--plugin-config",
            "wiki.lang=en",
            "--plugin-config",
            "wiki.token=s3cr3t",
            "--plugin-config-env",
            "wiki.key=WIKI_KEY",
        ]);
        let args = policed
            .narrowed(&profile(
                "[profile.p]\nplugin = { http = [\"api.example.org\"], memory_bytes = 1048576, timeout_ms = 15000, config = [\"wiki.lang\"] }\n",
            ))
            .unwrap();
        assert_eq!(
            args.plugin_http
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>(),
            ["api.example.org"]
        );
        assert_eq!(args.plugin_memory, Some(1 << 20));
        assert_eq!(args.plugin_max_memory, Some(1 << 20));
        // The default per-call limit (10 s) stays under the ceiling; the most a manifest
        // may ask for (20 s) comes down to it.
        assert_eq!(args.plugin_timeout, Some(Duration::from_secs(10)));
        assert_eq!(args.plugin_max_timeout, Some(Duration::from_secs(15)));
        assert_eq!(args.plugin_config, ["wiki.lang=en"]);
        assert!(
            args.plugin_config_env.is_empty(),
            "{:?}",
            args.plugin_config_env
        );
        assert!(args.no_builtins && !args.plan, "plugins only");
        // A ceiling above the operator's is the operator's.
        let args = policed
            .narrowed(&profile(
                "[profile.p]\nplugin = { memory_bytes = 1073741824 }\n",
            ))
            .unwrap();
        assert_eq!(args.plugin_memory, Some(32 << 20));
        // A host the operator does not allow, or a pattern wider than one it does.
        for host in [
            "other.example.org",
            "*.example.org",
            "http://127.0.0.1:9090",
        ] {
            let err = policed
                .narrowed(&profile(&format!(
                    "[profile.p]\nplugin = {{ http = [\"{host}\"] }}\n"
                )))
                .unwrap_err()
                .to_string();
            assert!(
                err.starts_with("policy profile.p.plugin.http: ")
                    && err.ends_with("is not a host the operator allows (--plugin-http); a profile may only narrow them"),
                "{err}"
            );
        }
    }
}
