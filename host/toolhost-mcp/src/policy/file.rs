//! The policy file: TOML read with a size cap, its shape, and the bounds of its values.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;

use super::quota::{QuotaLimits, MAX_BYTES_PER_DAY, MAX_CONCURRENT, MAX_PER_MINUTE};
use super::{
    FileAccess, Match, PluginCeilings, Policy, PolicyError, Profile, MAX_LIST, MAX_PROFILES,
    MAX_RULES,
};

/// The largest policy file read: 1 MiB. A larger one is refused, not truncated.
pub const MAX_POLICY_BYTES: u64 = 1 << 20;

/// The longest plugin memory ceiling: 4 GiB (a wasm32 memory's most).
const MAX_MEMORY: u64 = 4 << 30;
/// The longest plugin time ceiling: 1 hour, in milliseconds.
const MAX_TIMEOUT_MS: u64 = 3_600_000;
/// The longest name (profile, tool, plugin, client, scope) or list entry: 256 bytes.
const MAX_NAME: usize = 256;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPolicy {
    #[serde(default)]
    principal: Vec<RawRule>,
    #[serde(default)]
    profile: BTreeMap<String, RawProfile>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    token: Option<String>,
    sub: Option<String>,
    scope: Option<String>,
    profile: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProfile {
    tools: Option<Vec<String>>,
    #[serde(default)]
    plugins: Vec<String>,
    files: Option<String>,
    root: Option<String>,
    #[serde(default)]
    plugin: RawCeilings,
    #[serde(default)]
    quota: RawQuota,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawCeilings {
    http: Option<Vec<String>>,
    config: Option<Vec<String>>,
    memory_bytes: Option<i64>,
    timeout_ms: Option<i64>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawQuota {
    calls_per_minute: Option<i64>,
    concurrent_calls: Option<i64>,
    bytes_written_per_day: Option<i64>,
    http_requests_per_minute: Option<i64>,
}

pub(super) fn read(path: &Path) -> Result<Policy, PolicyError> {
    let shown = path.display().to_string();
    let failed = |err: std::io::Error| PolicyError::Read {
        path: shown.clone(),
        reason: err.to_string(),
    };
    let file = std::fs::File::open(path).map_err(failed)?;
    // Read one byte past the cap to know it is over, never more.
    let mut bytes = Vec::new();
    file.take(MAX_POLICY_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(failed)?;
    if bytes.len() as u64 > MAX_POLICY_BYTES {
        return Err(PolicyError::TooLarge {
            got: bytes.len() as u64,
        });
    }
    let text = String::from_utf8(bytes).map_err(|err| PolicyError::Syntax {
        line: line_of_offset(
            &String::from_utf8_lossy(err.as_bytes()),
            err.utf8_error().valid_up_to(),
        ),
        problem: "the file is not UTF-8 text".into(),
    })?;
    parse(&text)
}

/// The 1-based line of byte `offset` of `text`.
fn line_of_offset(text: &str, offset: usize) -> usize {
    text.as_bytes()
        .iter()
        .take(offset)
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

pub(super) fn parse(text: &str) -> Result<Policy, PolicyError> {
    if text.len() as u64 > MAX_POLICY_BYTES {
        return Err(PolicyError::TooLarge {
            got: text.len() as u64,
        });
    }
    let raw: RawPolicy = toml::from_str(text).map_err(|err| PolicyError::Syntax {
        line: err
            .span()
            .map_or(0, |span| line_of_offset(text, span.start)),
        problem: err.message().trim().to_owned(),
    })?;
    if raw.profile.is_empty() {
        return Err(invalid(
            "profile",
            "the policy names no profile; add at least one [profile.NAME] table",
        ));
    }
    if raw.profile.len() > MAX_PROFILES {
        return Err(invalid(
            "profile",
            format!(
                "{} profiles; at most {MAX_PROFILES} are allowed",
                raw.profile.len()
            ),
        ));
    }
    if raw.principal.len() > MAX_RULES {
        return Err(invalid(
            "principal",
            format!(
                "{} [[principal]] rules; at most {MAX_RULES} are allowed",
                raw.principal.len()
            ),
        ));
    }
    let mut profiles = BTreeMap::new();
    for (name, profile) in raw.profile {
        let profile = profile_of(&name, profile)?;
        profiles.insert(name, profile);
    }
    let mut rules = Vec::with_capacity(raw.principal.len());
    for (index, rule) in raw.principal.into_iter().enumerate() {
        let place = format!("principal {}", index + 1);
        let matched =
            match (rule.token, rule.sub, rule.scope) {
                (Some(name), None, None) | (None, Some(name), None) => {
                    check_name(&place, &name)?;
                    Match::Client(name)
                }
                (None, None, Some(scope)) => {
                    check_name(&place, &scope)?;
                    Match::Scope(scope)
                }
                _ => return Err(invalid(
                    &place,
                    "give exactly one of token = \"NAME\", sub = \"SUBJECT\" or scope = \"SCOPE\"",
                )),
            };
        if !profiles.contains_key(&rule.profile) {
            return Err(invalid(
                &place,
                format!(
                    "it maps to the profile {:?}, which the policy does not define; define [profile.{}] or name one of: {}",
                    rule.profile,
                    rule.profile,
                    profiles.keys().cloned().collect::<Vec<_>>().join(", ")
                ),
            ));
        }
        rules.push((matched, rule.profile));
    }
    Ok(Policy { profiles, rules })
}

fn invalid(place: &str, problem: impl Into<String>) -> PolicyError {
    PolicyError::Invalid {
        place: place.to_owned(),
        problem: problem.into(),
    }
}

fn check_name(place: &str, name: &str) -> Result<(), PolicyError> {
    if name.is_empty() || name.len() > MAX_NAME || name.chars().any(char::is_control) {
        return Err(invalid(
            place,
            format!(
                "{:?} is not a valid name: use 1 to {MAX_NAME} printable characters",
                name.chars().take(40).collect::<String>()
            ),
        ));
    }
    Ok(())
}

fn check_list(place: &str, list: &[String]) -> Result<(), PolicyError> {
    if list.len() > MAX_LIST {
        return Err(invalid(
            place,
            format!("{} entries; at most {MAX_LIST}", list.len()),
        ));
    }
    list.iter().try_for_each(|name| check_name(place, name))
}

/// `value` as a count within 1..=`max` (0 is refused: a quota of 0 would refuse
/// everything; leave the quota out for none).
fn bounded(
    place: &str,
    value: Option<i64>,
    min: u64,
    max: u64,
) -> Result<Option<u64>, PolicyError> {
    let Some(value) = value else { return Ok(None) };
    match u64::try_from(value) {
        Ok(value) if (min..=max).contains(&value) => Ok(Some(value)),
        _ => Err(invalid(
            place,
            format!("{value} is out of bounds; give a whole number from {min} to {max}, or leave it out for no limit"),
        )),
    }
}

fn profile_of(name: &str, raw: RawProfile) -> Result<Profile, PolicyError> {
    let place = |field: &str| format!("profile.{name}.{field}");
    if name.is_empty()
        || name.len() > 64
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        return Err(invalid(
            &format!("profile.{name}"),
            "a profile's name is 1 to 64 characters of A-Za-z0-9_-",
        ));
    }
    if let Some(tools) = &raw.tools {
        check_list(&place("tools"), tools)?;
    }
    check_list(&place("plugins"), &raw.plugins)?;
    let files = match raw.files.as_deref() {
        None | Some("read-write") => FileAccess::ReadWrite,
        Some("read-only") => FileAccess::ReadOnly,
        Some("none") => FileAccess::None,
        Some(other) => {
            return Err(invalid(
                &place("files"),
                format!(
                "{other:?} is not a file access; write \"none\", \"read-only\" or \"read-write\""
            ),
            ))
        }
    };
    if let Some(root) = &raw.root {
        check_name(&place("root"), root)?;
    }
    let ceilings = raw.plugin;
    if let Some(http) = &ceilings.http {
        check_list(&place("plugin.http"), http)?;
    }
    if let Some(config) = &ceilings.config {
        check_list(&place("plugin.config"), config)?;
        if let Some(bad) = config.iter().find(|key| !key.contains('.')) {
            return Err(invalid(
                &place("plugin.config"),
                format!("{bad:?} is not PLUGIN.KEY; name each value as --plugin-config does"),
            ));
        }
    }
    let plugin = PluginCeilings {
        http: ceilings.http,
        config: ceilings.config,
        memory_bytes: bounded(
            &place("plugin.memory_bytes"),
            ceilings.memory_bytes,
            1 << 16,
            MAX_MEMORY,
        )?,
        timeout: bounded(
            &place("plugin.timeout_ms"),
            ceilings.timeout_ms,
            1,
            MAX_TIMEOUT_MS,
        )?
        .map(Duration::from_millis),
    };
    let quota = QuotaLimits {
        calls_per_minute: bounded(
            &place("quota.calls_per_minute"),
            raw.quota.calls_per_minute,
            1,
            MAX_PER_MINUTE,
        )?,
        concurrent_calls: bounded(
            &place("quota.concurrent_calls"),
            raw.quota.concurrent_calls,
            1,
            MAX_CONCURRENT,
        )?,
        bytes_written_per_day: bounded(
            &place("quota.bytes_written_per_day"),
            raw.quota.bytes_written_per_day,
            1,
            MAX_BYTES_PER_DAY,
        )?,
        http_requests_per_minute: bounded(
            &place("quota.http_requests_per_minute"),
            raw.quota.http_requests_per_minute,
            1,
            MAX_PER_MINUTE,
        )?,
    };
    Ok(Profile {
        name: name.to_owned(),
        tools: raw.tools,
        plugins: raw.plugins,
        files,
        root: raw.root,
        plugin,
        quota,
    })
}
