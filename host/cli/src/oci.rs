//! Shipping plugins: `host lock` pins a plugin directory, `host pull` fetches a plugin
//! from an OCI registry into one (verified, written atomically, pinned), `host push`
//! publishes one.

use std::fmt::Write as _;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context};

use toolhost::registry::{format_bytes, format_duration};
use toolhost_oci::layout::MAX_MANIFEST_LAYER_BYTES;
use toolhost_oci::{OciReference, Pulled, RegistryClient};
use toolhost_plugin::lock::{LockChange, LockEntry, PluginLock, Sha256Digest};

use super::args::oci::{LockArgs, PullArgs, PushArgs};
use super::output::print;
use super::plugins;
use super::registry_client::client_options;

/// `host lock`: pins every component of the directory as it is now.
pub(crate) fn lock(args: LockArgs) -> anyhow::Result<ExitCode> {
    let dir = &args.plugins;
    if !dir.is_dir() {
        anyhow::bail!(
            "--plugins {} is not a directory; pass the directory that holds the plugins' .wasm files",
            dir.display()
        );
    }
    let previous = PluginLock::read(dir)?;
    let (lock, changes) = PluginLock::scan(dir, previous.as_ref())?;
    let path = lock.write(dir)?;
    print(&lock_report(&path, &changes))
}

/// One line per change, then a summary naming the lock file.
fn lock_report(path: &std::path::Path, changes: &[LockChange]) -> String {
    let mut text = String::new();
    let mut pinned = 0;
    for change in changes {
        let _ = match change {
            LockChange::Added { file, digest } => {
                pinned += 1;
                writeln!(text, "+ {file}  {digest}")
            }
            LockChange::Changed {
                file,
                before,
                after,
            } => {
                pinned += 1;
                let manifest = if before.manifest_digest != after.manifest_digest {
                    format!(
                        " (manifest {} -> {})",
                        describe(before.manifest_digest.as_ref()),
                        describe(after.manifest_digest.as_ref())
                    )
                } else {
                    String::new()
                };
                writeln!(
                    text,
                    "~ {file}  {} -> {}{manifest}",
                    before.digest, after.digest
                )
            }
            LockChange::Unchanged { file } => {
                pinned += 1;
                writeln!(text, "= {file}")
            }
            LockChange::Removed { file } => {
                writeln!(text, "- {file}  (no longer in the directory)")
            }
        };
    }
    let _ = writeln!(text, "{pinned} plugin(s) pinned in {}", path.display());
    text
}

fn describe(digest: Option<&toolhost_plugin::lock::Sha256Digest>) -> String {
    digest.map_or_else(|| "none".to_owned(), ToString::to_string)
}

/// `host pull`: resolve the reference once, check it against the lock, download into
/// temporary files in the directory (verified), then move them into place and pin them.
pub(crate) async fn pull(args: PullArgs) -> anyhow::Result<ExitCode> {
    let reference = OciReference::parse(&args.reference)?;
    let name = match &args.name {
        Some(name) => check_plugin_name(name)?,
        None => reference.plugin_name(),
    }
    .to_owned();
    let dir = &args.plugins;
    if !dir.is_dir() {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create the plugin directory {}", dir.display()))?;
    }
    // A lock that cannot be read stops the pull before anything is fetched.
    let mut lock = PluginLock::read(dir)?.unwrap_or_default();
    let lock_path = PluginLock::path_in(dir);
    let file = format!("{name}.wasm");
    let wasm_path = dir.join(&file);
    let client = RegistryClient::new(&reference, client_options(&args.registry, &reference)?)?;
    if client.is_insecure() && !reference.is_loopback() {
        tracing::warn!(
            "speaking plain HTTP to {} (--insecure-registry): anyone on the way can read the traffic; the content is still checked against its digest",
            reference.registry()
        );
    }
    let resolved = client.resolve().await?;
    let source = reference.to_string();
    let previous = lock.entry(&file).cloned();
    // The keys to verify with: --verify-key, else (an entry pinned with a signer is
    // replaced only by what the same signer signed) the key its entry recorded. Verified before anything is
    // downloaded: a refused pull leaves the directory as it was.
    let mut keys = crate::signing::read_public_keys("--verify-key", &args.verify_key)?;
    if keys.is_empty() {
        if let Some(key) = previous
            .as_ref()
            .map(crate::signing::recorded_key)
            .transpose()?
            .flatten()
        {
            keys.push(key);
        }
    }
    let verified = if keys.is_empty() {
        None
    } else {
        Some(client.verify_signature(&resolved, &keys).await?)
    };
    let signature = verified
        .as_ref()
        .map(|verified| crate::signing::lock_signature(verified, resolved.manifests()));
    if let Some(entry) = &previous {
        let same_source = entry.source.as_deref() == Some(source.as_str());
        let same_signer = signature.is_none()
            || entry.signature.as_ref().map(|s| &s.key) == signature.as_ref().map(|s| &s.key);
        if same_source
            && entry.source_digest.as_deref() == Some(resolved.digest.as_str())
            && same_signer
        {
            if in_place(dir, &name, entry) {
                return print(&format!(
                    "{file} is up to date: {source} is still {}\n",
                    resolved.digest
                ));
            }
        } else if same_source && !args.update {
            bail!(
                "{source} now points to {}, but {} pins {} from it; pass --update to take the new version",
                resolved.digest,
                lock_path.display(),
                entry.source_digest.as_deref().unwrap_or("another digest")
            );
        } else if !same_source && !args.update {
            let from = match &entry.source {
                Some(other) => format!(" from {other}"),
                None => " (not pulled from a registry)".to_owned(),
            };
            bail!(
                "{} is already pinned in {}{from}; pass --update to replace it with {source}, or --name to pull it under another name",
                wasm_path.display(),
                lock_path.display()
            );
        }
    } else if std::fs::symlink_metadata(&wasm_path).is_ok() && !args.update {
        bail!(
            "{} exists and is not pinned in {}; pass --update to replace it with {source}, or --name to pull it under another name",
            wasm_path.display(),
            lock_path.display()
        );
    }
    let pulled = client.download(&resolved, dir, &name).await?;
    let component = Sha256Digest::parse(&pulled.component.digest).map_err(anyhow::Error::msg)?;
    let manifest = match &pulled.manifest {
        Some(file) => Some(Sha256Digest::parse(&file.digest).map_err(anyhow::Error::msg)?),
        None => None,
    };
    let entry = LockEntry {
        file: file.clone(),
        digest: component,
        manifest_digest: manifest,
        source: Some(source.clone()),
        source_digest: Some(resolved.digest.clone()),
        signature,
    };
    let mut report = format!(
        "pulled {source}\n  digest      {}\n  {file}  {component} ({})\n",
        resolved.digest,
        format_bytes(pulled.component.size)
    );
    if let Some(verified) = &verified {
        let _ = writeln!(
            report,
            "  signed by   {} ({})",
            verified.key.fingerprint(),
            verified.key.algorithm()
        );
    }
    if let Some(manifest) = manifest {
        let _ = writeln!(report, "  {name}.toml  {manifest}");
    }
    install(dir, &name, pulled, &mut lock, entry)?;
    let _ = writeln!(report, "pinned in {}", lock_path.display());
    report += &asks_for(dir, &name).await;
    print(&report)
}

/// What the pulled plugin asks for (its tools, file access, HTTP hosts, configuration
/// keys, limits) and the operator flags that allow it, from the inspection `host
/// inspect` runs with this host's defaults, so that no one learns them from a load
/// error later. When it does not load even so, why.
async fn asks_for(dir: &Path, name: &str) -> String {
    let path = dir.join(format!("{name}.wasm"));
    let inspected = tokio::task::spawn_blocking(move || inspect_raising_limits(&path)).await;
    let (info, raised) = match inspected {
        Ok(Ok(found)) => found,
        Ok(Err(err)) => {
            return format!("{name} does not load with this host's defaults: {err:#}\n")
        }
        Err(err) => return format!("{name} could not be inspected: {err}\n"),
    };
    let mut text = format!("{name} asks for:\n");
    text += &plugins::grants_text(&info);
    let tools: Vec<&str> = info.tools.iter().map(|tool| tool.name.as_str()).collect();
    let _ = writeln!(text, "  tools ({}): {}", tools.len(), tools.join(", "));
    let flags = plugins::load_flags(&info, &raised);
    let command = format!("host run --plugins {}", dir.display());
    if flags.is_empty() {
        let _ = writeln!(
            text,
            "  to load it: no flags beyond the defaults ({command})"
        );
    } else {
        let _ = writeln!(text, "  to load it: {command} {}", flags.join(" "));
    }
    text
}

/// Inspects the plugin at `path` with the default settings; when its manifest asks for
/// a timeout or memory above the default maximum, once more with that maximum raised,
/// noting the flag that raises it (`--plugin-max-timeout 60s`).
fn inspect_raising_limits(
    path: &Path,
) -> anyhow::Result<(toolhost_plugin::PluginInfo, Vec<String>)> {
    use toolhost_plugin::limits::LimitValue;
    use toolhost_plugin::{PluginError, PluginErrorKind};
    let mut config = plugins::inspect_config(None);
    let mut raised = Vec::new();
    // timeout and memory: at most one raise each.
    for _ in 0..3 {
        let err = match plugins::inspect(path, config.clone()) {
            Ok(info) => return Ok((info, raised)),
            Err(err) => err,
        };
        match err.downcast_ref::<PluginError>().map(PluginError::kind) {
            Some(PluginErrorKind::LimitTooHigh {
                limit: "timeout",
                asked: LimitValue::Duration(asked),
                ..
            }) if config.max_limits().timeout() < *asked => {
                let max = config.max_limits().clone().with_timeout(*asked);
                config = config.to_builder().max_limits(max).build();
                raised.push(format!("--plugin-max-timeout {}", format_duration(*asked)));
            }
            Some(PluginErrorKind::LimitTooHigh {
                limit: "memory",
                asked: LimitValue::Bytes(asked),
                ..
            }) if config.max_limits().memory_bytes() < *asked => {
                let max = config.max_limits().clone().with_memory_bytes(*asked);
                config = config.to_builder().max_limits(max).build();
                raised.push(format!("--plugin-max-memory {}", size_flag(*asked)));
            }
            _ => return Err(err),
        }
    }
    plugins::inspect(path, config).map(|info| (info, raised))
}

/// A size as the size flags take it: `128MiB`, `4KiB`, else bytes.
fn size_flag(bytes: u64) -> String {
    if bytes.is_multiple_of(1 << 20) {
        format!("{}MiB", bytes >> 20)
    } else if bytes.is_multiple_of(1 << 10) {
        format!("{}KiB", bytes >> 10)
    } else {
        bytes.to_string()
    }
}

/// Whether `NAME.wasm` (and its manifest) in `dir` are the bytes `entry` pins.
fn in_place(dir: &Path, name: &str, entry: &LockEntry) -> bool {
    let digest_of = |path: PathBuf| std::fs::read(path).ok().map(|b| Sha256Digest::of(&b));
    digest_of(dir.join(format!("{name}.wasm"))) == Some(entry.digest)
        && digest_of(dir.join(format!("{name}.toml"))) == entry.manifest_digest
}

/// Moves the downloaded files into place as `NAME.wasm` (and `NAME.toml`) and writes the
/// lock, or, when any step fails, puts everything back as it was: the previous files
/// are moved aside first and restored, and the lock is written last.
fn install(
    dir: &Path,
    name: &str,
    pulled: Pulled,
    lock: &mut PluginLock,
    entry: LockEntry,
) -> anyhow::Result<()> {
    let wasm = dir.join(format!("{name}.wasm"));
    let toml = dir.join(format!("{name}.toml"));
    let mut moved: Vec<(PathBuf, PathBuf)> = Vec::new();
    let mut placed: Vec<PathBuf> = Vec::new();
    let steps = || -> anyhow::Result<()> {
        for target in [&wasm, &toml] {
            if std::fs::symlink_metadata(target).is_ok() {
                let aside = aside_path(target);
                std::fs::rename(target, &aside)
                    .with_context(|| format!("cannot move {} aside", target.display()))?;
                moved.push((aside, target.clone()));
            }
        }
        pulled
            .component
            .file
            .persist(&wasm)
            .map_err(|err| err.error)
            .with_context(|| format!("cannot write {}", wasm.display()))?;
        placed.push(wasm.clone());
        if let Some(manifest) = pulled.manifest {
            manifest
                .file
                .persist(&toml)
                .map_err(|err| err.error)
                .with_context(|| format!("cannot write {}", toml.display()))?;
            placed.push(toml.clone());
        }
        let mut updated = lock.clone();
        updated.upsert(entry);
        updated.write(dir)?;
        *lock = updated;
        Ok(())
    };
    match steps() {
        Ok(()) => {
            for (aside, _) in moved {
                let _ = std::fs::remove_file(aside);
            }
            Ok(())
        }
        Err(err) => {
            for path in placed {
                let _ = std::fs::remove_file(path);
            }
            for (aside, original) in moved {
                let _ = std::fs::rename(aside, original);
            }
            Err(err)
        }
    }
}

/// A free name next to `target` to move it aside to.
fn aside_path(target: &Path) -> PathBuf {
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let mut n = 0_u32;
    loop {
        let candidate =
            target.with_file_name(format!(".{name}.{}.{nanos}.{n}.old", std::process::id()));
        if std::fs::symlink_metadata(&candidate).is_err() {
            return candidate;
        }
        n += 1;
    }
}

/// `--name`: a plugin file stem (letters, digits, `_`, `-`, `.`; not starting with `.`
/// or `-`; at most 64 characters).
fn check_plugin_name(name: &str) -> anyhow::Result<&str> {
    let valid = !name.is_empty()
        && name.len() <= 64
        && !name.starts_with(['.', '-'])
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    if valid {
        Ok(name)
    } else {
        bail!(
            "--name \"{}\" is not a plugin name; use letters, digits, _ - and . (not first), e.g. --name greet",
            name.escape_debug()
        )
    }
}

/// `host push`: publishes FILE.wasm (with FILE.toml beside it, if any) and prints the
/// digest.
pub(crate) async fn push(args: PushArgs) -> anyhow::Result<ExitCode> {
    let reference = OciReference::parse_for_push(&args.reference)?;
    let path = &args.file;
    let file_name = path
        .file_name()
        .and_then(|name| name.to_str())
        .filter(|name| name.ends_with(".wasm"))
        .ok_or_else(|| {
            anyhow::anyhow!(
                "{} is not a .wasm file; pass the plugin component, e.g. plugins/dist/greet.wasm",
                path.display()
            )
        })?
        .to_owned();
    let component = read_capped(path, args.registry.max_plugin_bytes, "--max-plugin-bytes")?;
    let manifest_path = path.with_extension("toml");
    let manifest = if std::fs::symlink_metadata(&manifest_path).is_ok() {
        let bytes = read_capped(&manifest_path, MAX_MANIFEST_LAYER_BYTES, "")?;
        // Never publish a manifest no host would load.
        toolhost_plugin::manifest::parse_bytes(&manifest_path, bytes.clone())?;
        let name = format!("{}.toml", file_name.trim_end_matches(".wasm"));
        Some((bytes, name))
    } else {
        None
    };
    let with_manifest = manifest.as_ref().map(|(_, name)| name.clone());
    let client = RegistryClient::new(&reference, client_options(&args.registry, &reference)?)?;
    let pushed = client.push(component, &file_name, manifest).await?;
    let also = with_manifest
        .map(|name| format!(" and {name}"))
        .unwrap_or_default();
    print(&format!(
        "pushed {}{also} to {reference}\ndigest {}\npull exactly this: host pull oci://{}/{}@{} --plugins DIR\n",
        path.display(),
        pushed.digest,
        reference.registry(),
        reference.repository(),
        pushed.digest
    ))
}

/// Reads a regular file of at most `max` bytes (`flag` raises the cap, when there is one).
fn read_capped(path: &Path, max: u64, flag: &str) -> anyhow::Result<Vec<u8>> {
    let file =
        std::fs::File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    let metadata = file
        .metadata()
        .with_context(|| format!("cannot read {}", path.display()))?;
    if !metadata.is_file() {
        bail!("{} is not a regular file", path.display());
    }
    let too_large = |size: u64| {
        let raise = if flag.is_empty() {
            String::new()
        } else {
            format!("; raise {flag} if it is right")
        };
        anyhow::anyhow!(
            "{} is {}, over the limit of {}{raise}",
            path.display(),
            format_bytes(size),
            format_bytes(max)
        )
    };
    if metadata.len() > max {
        return Err(too_large(metadata.len()));
    }
    let mut bytes = Vec::new();
    file.take(max + 1)
        .read_to_end(&mut bytes)
        .with_context(|| format!("cannot read {}", path.display()))?;
    if bytes.len() as u64 > max {
        return Err(too_large(bytes.len() as u64));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limit_flags_are_written_as_the_flags_parse_them() {
        use std::time::Duration;
        // Every duration a flag can hold reads back as itself from the message's text.
        for duration in [
            Duration::from_millis(1),
            Duration::from_millis(1500),
            Duration::from_secs(60),
            Duration::from_secs(600),
        ] {
            let text = format_duration(duration);
            assert_eq!(
                crate::args::values::parse_duration(&text),
                Ok(duration),
                "{text}"
            );
        }
        assert_eq!(size_flag(128 << 20), "128MiB");
        assert_eq!(size_flag(12 << 10), "12KiB");
        assert_eq!(size_flag(1000), "1000");
        for text in ["60s", "1500ms"] {
            assert!(crate::args::values::parse_duration(text).is_ok(), "{text}");
        }
        for text in ["128MiB", "12KiB", "1000"] {
            assert!(crate::args::values::parse_size(text).is_ok(), "{text}");
        }
    }

    #[test]
    fn plugin_names() {
        assert_eq!(check_plugin_name("greet-2.x").unwrap(), "greet-2.x");
        for bad in [
            "",
            "../x",
            "a/b",
            ".hidden",
            "-flag",
            "a b",
            &"x".repeat(65),
        ] {
            assert!(check_plugin_name(bad).is_err(), "{bad}");
        }
    }
}
