//! Signed plugins on the command line: `host keygen`, `host sign`, the keys of
//! `host pull --verify-key`, and the lock policy of `--require-signer`.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{bail, Context};

use toolhost_oci::signing::{
    base64_text, check_pinned, private_key_pem, KeyAlgorithm, PinnedEvidence, PublicKey,
    SigningKey, Verified, MAX_KEY_FILE_BYTES,
};
use toolhost_oci::{OciReference, RegistryClient};
use toolhost_plugin::lock::{LockEntry, LockPolicy, LockSignature, PluginLock};

use super::args::oci::{KeygenArgs, SignArgs};
use super::output::print;

/// Reads a key file of at most [`MAX_KEY_FILE_BYTES`] as text.
fn read_key_file(flag: &str, path: &Path) -> anyhow::Result<String> {
    let file = std::fs::File::open(path)
        .with_context(|| format!("{flag} {}: cannot read it", path.display()))?;
    let mut text = String::new();
    file.take(MAX_KEY_FILE_BYTES + 1)
        .read_to_string(&mut text)
        .with_context(|| format!("{flag} {}: cannot read it as text", path.display()))?;
    if text.len() as u64 > MAX_KEY_FILE_BYTES {
        bail!(
            "{flag} {}: over {MAX_KEY_FILE_BYTES} bytes; a PEM key is a few hundred",
            path.display()
        );
    }
    Ok(text)
}

/// The public keys of `flag` (`--verify-key`, `--require-signer`).
pub(crate) fn read_public_keys(flag: &str, paths: &[PathBuf]) -> anyhow::Result<Vec<PublicKey>> {
    paths
        .iter()
        .map(|path| {
            let text = read_key_file(flag, path)?;
            PublicKey::from_pem(&text)
                .map_err(|err| anyhow::anyhow!("{flag} {}: {err}", path.display()))
        })
        .collect()
}

/// The passphrase in the environment variable `name`, if one is named.
fn passphrase(name: Option<&str>) -> anyhow::Result<Option<Vec<u8>>> {
    let Some(name) = name else { return Ok(None) };
    match std::env::var_os(name) {
        Some(value) if !value.is_empty() => Ok(Some(value.into_encoded_bytes())),
        _ => bail!(
            "--passphrase-env {name}: the environment variable {name} is not set or empty; set it to the key's passphrase"
        ),
    }
}

/// `host keygen`: PREFIX.key (0600, created new) and PREFIX.pub.
pub(crate) fn keygen(args: &KeygenArgs) -> anyhow::Result<ExitCode> {
    let algorithm = if args.ed25519 {
        KeyAlgorithm::Ed25519
    } else {
        KeyAlgorithm::EcdsaP256
    };
    let passphrase = passphrase(args.passphrase_env.as_deref())?;
    let (key, pkcs8) = SigningKey::generate(algorithm)?;
    let private = private_key_pem(&pkcs8, passphrase.as_deref())?;
    let prefix = args.out.as_os_str().to_owned();
    let with = |ext: &str| {
        let mut path = prefix.clone();
        path.push(ext);
        PathBuf::from(path)
    };
    let (private_path, public_path) = (with(".key"), with(".pub"));
    for path in [&private_path, &public_path] {
        if std::fs::symlink_metadata(path).is_ok() {
            bail!(
                "{} exists; keygen does not overwrite keys: remove it, or pass another --out",
                path.display()
            );
        }
    }
    write_new(&private_path, private.as_bytes(), 0o600)?;
    if let Err(err) = write_new(&public_path, key.public_key().to_pem().as_bytes(), 0o644) {
        let _ = std::fs::remove_file(&private_path);
        return Err(err);
    }
    let encrypted = if passphrase.is_some() {
        "encrypted with the passphrase in $".to_owned()
            + args.passphrase_env.as_deref().unwrap_or_default()
    } else {
        "not encrypted: keep it secret".to_owned()
    };
    print(&format!(
        "wrote {} (private, mode 600, {encrypted}) and {} (public)\n  algorithm    {}\n  fingerprint  {}\nsign:   host sign oci://HOST/REPO:TAG --key {}\nverify: host pull oci://HOST/REPO:TAG --plugins DIR --verify-key {}\n",
        private_path.display(),
        public_path.display(),
        algorithm,
        key.public_key().fingerprint(),
        private_path.display(),
        public_path.display(),
    ))
}

/// Creates `path` (never over an existing file) with `mode` and writes `bytes`.
fn write_new(path: &Path, bytes: &[u8], mode: u32) -> anyhow::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(mode);
    }
    #[cfg(not(unix))]
    let _ = mode;
    let mut file = options
        .open(path)
        .with_context(|| format!("cannot create {}", path.display()))?;
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .with_context(|| format!("cannot write {}", path.display()))
}

/// `host sign REF --key KEY`: resolves the reference (a plugin), signs its manifest
/// digest and pushes the signature.
pub(crate) async fn sign(args: SignArgs) -> anyhow::Result<ExitCode> {
    crate::secret_file::warn_if_others_may_access("--key", &args.key);
    let text = read_key_file("--key", &args.key)?;
    let passphrase = passphrase(args.passphrase_env.as_deref())?;
    let key = SigningKey::from_pem(&text, passphrase.as_deref())
        .map_err(|err| anyhow::anyhow!("--key {}: {err}", args.key.display()))?;
    let reference = OciReference::parse(&args.reference)?;
    let options = crate::registry_client::client_options(&args.registry, &reference)?;
    let client = RegistryClient::new(&reference, options)?;
    let resolved = client.resolve().await?;
    let signed = client.push_signature(&resolved.digest, &key).await?;
    print(&format!(
        "signed {reference}\n  digest     {}\n  key        {}\n  stored as  oci://{}/{}:{} ({} signature(s))\nverify: host pull {reference} --plugins DIR --verify-key KEY.pub\n",
        signed.digest,
        signed.key,
        reference.registry(),
        reference.repository(),
        signed.tag,
        signed.signatures
    ))
}

/// What the lock keeps of a verified pull.
pub(crate) fn lock_signature(verified: &Verified, manifests: &[Vec<u8>]) -> LockSignature {
    LockSignature {
        key: verified.key.fingerprint(),
        public_key: base64_text(verified.key.spki()),
        payload: base64_text(&verified.payload),
        signature: base64_text(&verified.signature),
        manifests: manifests.iter().map(|body| base64_text(body)).collect(),
    }
}

/// The key a lock entry recorded (for `host pull --update` without --verify-key).
pub(crate) fn recorded_key(entry: &LockEntry) -> anyhow::Result<Option<PublicKey>> {
    let Some(signature) = &entry.signature else {
        return Ok(None);
    };
    let key = toolhost_oci::signing::decode_base64(&signature.public_key)
        .map_err(anyhow::Error::msg)
        .and_then(|der| PublicKey::from_spki(&der).map_err(anyhow::Error::from))
        .with_context(|| format!("the lock entry of {} records a key that does not parse; pull it again with --verify-key", entry.file))?;
    if key.fingerprint() != signature.key {
        bail!(
            "the lock entry of {} records the key {} but its public key is {}: the lock was edited; pull it again with --verify-key",
            entry.file,
            signature.key,
            key.fingerprint()
        );
    }
    Ok(Some(key))
}

/// The policy of `--require-signer`: every lock entry whose signature does not hold for
/// one of `keys` is refused, with the reason.
pub(crate) fn signer_policy(keys: Vec<PublicKey>) -> LockPolicy {
    Arc::new(move |lock: &mut PluginLock| {
        let refusals: Vec<(String, String)> = lock
            .plugins
            .iter()
            .filter_map(|entry| {
                signer_refusal(entry, &keys).map(|reason| (entry.file.clone(), reason))
            })
            .collect();
        for (file, reason) in refusals {
            lock.refuse(&file, reason);
        }
    })
}

/// Why `entry` does not meet `--require-signer` with `keys`, if it does not.
fn signer_refusal(entry: &LockEntry, keys: &[PublicKey]) -> Option<String> {
    let Some(signature) = &entry.signature else {
        return Some(
            "--require-signer: its lock entry names no signer (it was not pulled with --verify-key, or was pinned by `host lock`); pull it with `host pull REF --verify-key KEY.pub`".into(),
        );
    };
    let Some(source_digest) = &entry.source_digest else {
        return Some("--require-signer: its lock entry has a signature but no source_digest; pull it again with --verify-key".into());
    };
    let evidence = PinnedEvidence {
        key: &signature.key,
        payload: &signature.payload,
        signature: &signature.signature,
        manifests: &signature.manifests,
    };
    let component = entry.digest.to_string();
    let manifest = entry.manifest_digest.map(|digest| digest.to_string());
    check_pinned(
        &evidence,
        keys,
        source_digest,
        &component,
        manifest.as_deref(),
    )
    .err()
    .map(|reason| format!("--require-signer: {reason}"))
}
