//! `host inspect`: what a plugin exports, asks for and imports, as text or JSON, and the
//! operator flags that would allow what it asks for.

use std::path::Path;

use serde_json::{json, Value};

use toolhost::registry::format_bytes;
use toolhost::registry::format_duration;
use toolhost_plugin::cache::CompileSource;
use toolhost_plugin::{FileAccess, PluginHost, PluginHostConfig, PluginInfo};

/// `host inspect`: what the plugin exports, asks for and imports.
///
/// # Errors
/// When the plugin host cannot start or the file is not a loadable plugin.
pub(crate) fn inspect(file: &Path, config: PluginHostConfig) -> anyhow::Result<PluginInfo> {
    // PluginErrorKind::Host already says "the plugin host cannot start: ...".
    let host = PluginHost::new(config)?;
    // The plugin host's errors already name the file.
    Ok(host.inspect(file)?)
}

/// The `--json` form of [`inspect`]'s report.
pub(crate) fn info_json(info: &PluginInfo) -> Value {
    let limits = &info.limits;
    json!({
        "name": info.name,
        "namespace": info.namespace,
        "path": info.path,
        "manifest": info.manifest,
        "grants": {
            "files": info.grants.as_str(),
            "allowed_by_default_host": info.grant_allowed,
            "root": info.root,
        },
        "limits": {
            "timeout_ms": u64::try_from(limits.timeout().as_millis()).unwrap_or(u64::MAX),
            "memory_bytes": limits.memory_bytes(),
            "fuel": limits.fuel(),
            "max_output_bytes": limits.max_output_bytes(),
            "max_stderr_bytes": limits.max_stderr_bytes(),
            "max_instances": limits.max_instances(),
            "max_tables": limits.max_tables(),
            "max_handles": limits.max_handles(),
        },
        "http": {
            "hosts": info.http,
            "allowed_by_default_host": info.http_allowed,
        },
        // Keys only: whether a value is set, never the value.
        "config": info.config.entries().iter().map(|entry| json!({
            "key": entry.key.name,
            "description": entry.key.description,
            "secret": entry.key.secret,
            "required": entry.key.required,
            "set": entry.value.is_some(),
        })).collect::<Vec<_>>(),
        "ask": {
            "asks": info.ask,
            "allowed_by_default_host": info.ask_allowed,
        },
        // `null` when the manifest asks for no sampling.
        "sampling": info.sampling.map(|grant| json!({
            "max_requests": grant.max_requests,
            "max_tokens": grant.max_tokens,
            "allowed_by_default_host": info.sampling_allowed,
        })),
        // `null` when the manifest asks to call no tool of its registry.
        "registry_tools": info.tools_grant.as_ref().map(|grant| json!({
            "tools": grant.tools.to_string(),
            "max_tool_calls": grant.max_tool_calls,
            "allowed_by_default_host": info.tools_allowed.as_ref().map(|allowed| grant.tools.intersect(allowed).to_string()),
        })),
        "tools": info.tools,
        "prompts": info.prompts,
        "resources": {
            "offered": info.offers_resources,
            "namespace": info.resource_namespace,
            "templates": info.resource_templates,
        },
        "imports": info.imports,
        "exports": info.exports,
        "compile": compile_json(info.compile),
    })
}

fn compile_json(compile: CompileSource) -> Value {
    let (source, took) = match compile {
        CompileSource::Compiled(took) => ("compiled", took),
        CompileSource::CacheHit(took) => ("cache_hit", took),
        CompileSource::Quick(took) => ("quick", took),
    };
    json!({ "source": source, "ms": took.as_micros() as f64 / 1e3 })
}

/// The human form of [`inspect`]'s report.
pub(crate) fn info_text(info: &PluginInfo) -> String {
    let mut out = format!("{} ({})\n", info.name, info.path.display());
    let manifest = info.manifest.as_ref().map_or_else(
        || "none (no grants, default limits)".to_owned(),
        |m| m.display().to_string(),
    );
    out += &format!("  manifest: {manifest}\n");
    out += &grants_text(info);
    if let Some(namespace) = &info.namespace {
        out +=
            &format!("  namespace: {namespace} (tools and prompts offered as {namespace}_NAME)\n");
    }
    out += &format!("  tools ({}):\n", info.tools.len());
    let width = info.tools.iter().map(|t| t.name.len()).max().unwrap_or(0);
    for tool in &info.tools {
        let summary = tool.description.lines().next().unwrap_or_default().trim();
        out += format!("    {:width$}  {summary}", tool.name).trim_end();
        out += "\n";
        let mut meta = Vec::new();
        if let Some(title) = &tool.title {
            meta.push(format!("title \"{title}\""));
        }
        let hints = &tool.annotations;
        for (name, hint) in [
            ("read-only", hints.read_only_hint),
            ("destructive", hints.destructive_hint),
            ("idempotent", hints.idempotent_hint),
            ("open-world", hints.open_world_hint),
        ] {
            if let Some(value) = hint {
                meta.push(format!("{name}: {value}"));
            }
        }
        if tool.output_schema.is_some() {
            meta.push("output schema".to_owned());
        }
        if !meta.is_empty() {
            out += &format!("    {:width$}  ({})\n", "", meta.join(", "));
        }
    }
    out += &offer_text(info);
    for (title, items) in [("imports", &info.imports), ("exports", &info.exports)] {
        out += &format!("  {title} ({}):\n", items.len());
        for item in items {
            out += &format!("    {item}\n");
        }
    }
    out += &format!("  {}\n", super::compile_text(info.compile));
    out
}

/// The prompts and resources a 0.3.0 `rich-plugin` offers (nothing when it offers none):
/// each prompt with its arguments (`*` marks a required one), and the namespace its
/// resources live under with its resource templates.
fn offer_text(info: &PluginInfo) -> String {
    let mut out = String::new();
    if !info.prompts.is_empty() {
        out += &format!(
            "  prompts ({}):
",
            info.prompts.len()
        );
        let width = info.prompts.iter().map(|p| p.name.len()).max().unwrap_or(0);
        for prompt in &info.prompts {
            let arguments: Vec<String> = prompt
                .arguments
                .iter()
                .map(|a| format!("{}{}", a.name, if a.required { "*" } else { "" }))
                .collect();
            let arguments = if arguments.is_empty() {
                String::new()
            } else {
                format!(" ({})", arguments.join(", "))
            };
            let summary = prompt
                .description
                .as_deref()
                .and_then(|d| d.lines().next())
                .unwrap_or_default()
                .trim();
            out += format!("    {:width$}  {summary}{arguments}", prompt.name).trim_end();
            out += "\n";
        }
    }
    if info.offers_resources {
        out += &format!(
            "  resources: under {} ({} template{})\n",
            info.resource_namespace,
            info.resource_templates.len(),
            if info.resource_templates.len() == 1 {
                ""
            } else {
                "s"
            }
        );
        for template in &info.resource_templates {
            let mime = template
                .mime_type
                .as_deref()
                .map(|m| format!(" ({m})"))
                .unwrap_or_default();
            out += &format!("    {}  {}{mime}\n", template.uri_template, template.name);
        }
    }
    out
}

/// What a plugin asks for, each with the operator flag that allows it: file access,
/// HTTP hosts, asking the user (when the manifest asks), configuration keys (which are
/// secret and whether set, never a value) and limits; the part of [`info_text`] that
/// `host pull` prints too.
pub(crate) fn grants_text(info: &PluginInfo) -> String {
    let mut out = String::new();
    let mut files = info.grants.as_str().to_owned();
    if let Some(root) = &info.root {
        files += &format!(", confined to {root}/");
    }
    if info.grants != FileAccess::None {
        files += &format!(
            " (the host must allow it: --plugin-files {})",
            info.grants.as_str()
        );
    }
    out += &format!("  file access: {files}\n");
    if info.http.is_empty() {
        out += "  http: none\n";
    } else {
        let hosts: Vec<String> = info.http.iter().map(ToString::to_string).collect();
        let flags: Vec<String> = info
            .http
            .iter()
            .map(|h| format!("--plugin-http {h}"))
            .collect();
        out += &format!(
            "  http: {} (the host must allow each: {})\n",
            hosts.join(", "),
            flags.join(" ")
        );
    }
    // Shown only when the manifest asks: a plugin that may not ask still loads, and
    // every question it asks is refused (`not-allowed`).
    if info.ask {
        out += if info.ask_allowed {
            "  ask the user: yes (allowed by this host's --plugin-ask)\n"
        } else {
            "  ask the user: yes (the host must allow it: --plugin-ask; else every question is refused)\n"
        };
    }
    // The same for sampling, with the grant's bounds.
    if let Some(grant) = info.sampling {
        out += &format!(
            "  sample the client's model: yes (max_requests = {} per call, max_tokens = {} per request; {})\n",
            grant.max_requests,
            grant.max_tokens,
            if info.sampling_allowed {
                "allowed by this host's --plugin-sampling"
            } else {
                "the host must allow it: --plugin-sampling; else every request is refused"
            }
        );
    }
    // The same for calling the registry's tools.
    if let Some(grant) = &info.tools_grant {
        out += &format!(
            "  call the registry's tools: {} (max_tool_calls = {} per call; {})\n",
            grant.tools,
            grant.max_tool_calls,
            match &info.tools_allowed {
                Some(allowed) => format!(
                    "this host's --plugin-tools allows: {}",
                    grant.tools.intersect(allowed)
                ),
                None => "the host must allow each: --plugin-tools NAME; else every call is refused"
                    .into(),
            }
        );
    }
    if info.config.entries().is_empty() {
        out += "  config: none\n";
    } else {
        out += &format!("  config ({}):\n", info.config.entries().len());
        for entry in info.config.entries() {
            let key = &entry.key;
            let mut what = vec![if key.required { "required" } else { "optional" }];
            if key.secret {
                what.push("secret");
            }
            let description = key
                .description
                .as_deref()
                .map(|d| format!("  {d}"))
                .unwrap_or_default();
            // Never a value: whether one is set is all this says.
            out += &format!(
                "    {} ({}; {}; {}){description}\n",
                key.name,
                what.join(", "),
                if entry.value.is_some() {
                    "set"
                } else {
                    "not set"
                },
                config_flag(&info.name, key)
            );
        }
    }
    let limits = &info.limits;
    let fuel = limits
        .fuel()
        .map_or_else(|| "no fuel limit".to_owned(), |f| format!("{f} fuel"));
    out += &format!(
        "  limits: {} per call, {} memory, {fuel}, {} output\n",
        format_duration(limits.timeout()),
        format_bytes(limits.memory_bytes()),
        format_bytes(limits.max_output_bytes() as u64),
    );
    out
}

/// The flag that gives `key` a value: a secret from the environment (never on the
/// command line, where `ps` shows it), any other as text.
fn config_flag(plugin: &str, key: &toolhost_plugin::plugin_config::ConfigKey) -> String {
    if key.secret {
        format!("--plugin-config-env {plugin}.{}=ENV_VAR", key.name)
    } else {
        format!("--plugin-config {plugin}.{}=VALUE", key.name)
    }
}

/// The operator flags a plugin needs to load: its file access, each HTTP host, a value
/// for each required configuration key, and `raised` (limits above the defaults).
pub(crate) fn load_flags(info: &PluginInfo, raised: &[String]) -> Vec<String> {
    let mut flags = Vec::new();
    if info.grants != FileAccess::None {
        flags.push(format!("--plugin-files {}", info.grants.as_str()));
    }
    flags.extend(info.http.iter().map(|h| format!("--plugin-http {h}")));
    flags.extend(raised.iter().cloned());
    flags.extend(
        info.config
            .entries()
            .iter()
            .filter(|entry| entry.key.required)
            .map(|entry| config_flag(&info.name, &entry.key)),
    );
    flags
}
