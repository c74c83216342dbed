//! The command line of shipping plugins: `host lock`, `host pull`, `host push`.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::values::{parse_duration, parse_size};

pub(crate) const LOCK_EXAMPLES: &str = "\
Examples:
  # Pin every plugin in ./plugins (writes ./plugins/plugins.lock)
  host lock --plugins ./plugins

  # From now on, only those exact bytes load; make a missing lock an error
  host run --plugins ./plugins --require-lock

Prints one line per plugin: + pinned, ~ re-pinned (old -> new digest), = unchanged,
- dropped (no longer in the directory). A component keeps the source it was pulled from
while its bytes are unchanged.

Exit codes: 0, 2 for a bad command line, 3 when a plugin cannot be read or the lock
cannot be written.";

pub(crate) const PULL_EXAMPLES: &str = "\
Examples:
  # Fetch a plugin into ./plugins as greet.wasm (+ greet.toml), verified and pinned
  host pull oci://ghcr.io/acme/greet:1 --plugins ./plugins

  # Exactly this digest (nothing else can be served for it)
  host pull oci://ghcr.io/acme/greet@sha256:4f1c... --plugins ./plugins

  # The tag moved: take the new digest (refused without --update)
  host pull oci://ghcr.io/acme/greet:1 --plugins ./plugins --update

  # A registry on this machine (plain HTTP is used for loopback only)
  host pull oci://127.0.0.1:5000/tools/greet:1 --plugins ./plugins

  # Only if signed (cosign format) by one of these keys; the lock records the signer
  host pull oci://ghcr.io/acme/greet:1 --plugins ./plugins --verify-key acme.pub

The component is written as NAME.wasm, NAME being the repository's last segment
(greet for acme/greet) or --name. Credentials come from --registry-user and
--registry-password-env, else ~/.docker/config.json ($DOCKER_CONFIG), else none.

Exit codes: 0, 2 for a bad command line, 3 when the pull fails (nothing in the
directory is changed then).";

pub(crate) const PUSH_EXAMPLES: &str = "\
Examples:
  # Publish a component (with greet.toml, if it sits next to it); prints the digest
  host push plugins/dist/greet.wasm oci://ghcr.io/acme/greet:1

  # To a registry on this machine
  host push greet.wasm oci://127.0.0.1:5000/tools/greet:1

The artifact is the Wasm OCI layout (config application/vnd.wasm.config.v0+json, one
application/wasm layer); a manifest travels as a second layer of type
application/vnd.wasm-toolhost.manifest.v1+toml.

Exit codes: 0, 2 for a bad command line, 3 when the push fails.";

/// `host lock`.
#[derive(Debug, Args)]
pub struct LockArgs {
    /// The plugin directory whose components to pin (writes DIR/plugins.lock).
    #[arg(long, value_name = "DIR")]
    pub plugins: PathBuf,
}

/// `host pull`.
#[derive(Debug, Args)]
pub struct PullArgs {
    /// What to fetch: oci://HOST/REPO:TAG or oci://HOST/REPO@sha256:DIGEST (HOST may end
    /// with :PORT).
    #[arg(value_name = "REFERENCE")]
    pub reference: String,
    /// The plugin directory to write the component into (and whose lock to update).
    #[arg(long, value_name = "DIR")]
    pub plugins: PathBuf,
    /// The plugin's name in DIR (NAME.wasm) [default: the repository's last segment].
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// Replace the plugin when its tag now points to another digest than the one pinned.
    /// A plugin pinned with a signer is verified again: with --verify-key when given,
    /// else with the key its lock entry recorded.
    #[arg(long)]
    pub update: bool,
    /// Install only if a cosign signature (the sha256-DIGEST.sig tag) by this key signs
    /// exactly the manifest pulled (repeatable: any of the keys). A PEM public key, ECDSA
    /// P-256 or Ed25519 (cosign.pub, or the .pub of `host keygen`). The lock records the
    /// signer and the signature, for `host run --require-signer`.
    #[arg(long, value_name = "KEY.pub")]
    pub verify_key: Vec<PathBuf>,
    /// How to reach the registry.
    #[command(flatten)]
    pub registry: OciArgs,
}

/// `host sign`.
#[derive(Debug, Args)]
pub struct SignArgs {
    /// The plugin to sign: oci://HOST/REPO:TAG or oci://HOST/REPO@sha256:DIGEST. The
    /// signature names the manifest digest the reference resolves to (printed).
    #[arg(value_name = "REFERENCE")]
    pub reference: String,
    /// The private key: a PEM "PRIVATE KEY" or "ENCRYPTED PRIVATE KEY" (PKCS#8), ECDSA
    /// P-256 or Ed25519, as `host keygen` writes it. Warned about when others than its
    /// owner may read it.
    #[arg(long, value_name = "KEY")]
    pub key: PathBuf,
    /// The environment variable holding the key's passphrase (for an encrypted key).
    #[arg(long, value_name = "VAR")]
    pub passphrase_env: Option<String>,
    /// How to reach the registry.
    #[command(flatten)]
    pub registry: OciArgs,
}

/// `host keygen`.
#[derive(Debug, Args)]
pub struct KeygenArgs {
    /// Where to write the key pair: PREFIX.key (private, mode 600) and PREFIX.pub
    /// (public). Existing files are not overwritten.
    #[arg(long, value_name = "PREFIX")]
    pub out: PathBuf,
    /// An Ed25519 key instead of ECDSA P-256 (cosign's default).
    #[arg(long)]
    pub ed25519: bool,
    /// Encrypt the private key with the passphrase in this environment variable
    /// (PKCS#8 PBES2: scrypt and AES-256-CBC). Without it, the key is written plain.
    #[arg(long, value_name = "VAR")]
    pub passphrase_env: Option<String>,
}

pub(crate) const SIGN_EXAMPLES: &str = "\
Examples:
  # Sign what a tag points to now (the digest is printed), with a host keygen key
  host sign oci://ghcr.io/acme/greet:1 --key acme.key

  # An encrypted key, its passphrase in an environment variable (never on the command line)
  SIGNING_PASS=... host sign oci://ghcr.io/acme/greet@sha256:4f1c... --key acme.key --passphrase-env SIGNING_PASS

The signature is stored as cosign stores it: the tag sha256-DIGEST.sig in the same
repository, one layer per signature (application/vnd.dev.cosign.simplesigning.v1+json,
the signature in its dev.cosignproject.cosign/signature annotation). `cosign verify
--key KEY.pub` accepts it, and `host pull --verify-key KEY.pub` accepts cosign's. To
sign a local file, push it first (`host push`) and sign the digest it prints: a
manifest's digest exists only once it is pushed.

Exit codes: 0, 2 for a bad command line, 3 when the key cannot be read or the push fails.";

pub(crate) const KEYGEN_EXAMPLES: &str = "\
Examples:
  # acme.key (private, mode 600) and acme.pub: ECDSA P-256, as cosign generate-key-pair
  host keygen --out acme

  # Ed25519, the private key encrypted with the passphrase in $SIGNING_PASS
  host keygen --out acme --ed25519 --passphrase-env SIGNING_PASS

Prints the public key's fingerprint (sha256 of its SubjectPublicKeyInfo DER), the name
plugins.lock records a signer by; never the private key. Keep PREFIX.key secret (a CI
secret), hand PREFIX.pub to whoever pulls: host pull --verify-key PREFIX.pub.

Exit codes: 0, 2 for a bad command line, 3 when a file exists or cannot be written.";

/// `host push`.
#[derive(Debug, Args)]
pub struct PushArgs {
    /// The component to publish; NAME.toml next to it goes along as its manifest.
    #[arg(value_name = "FILE.wasm")]
    pub file: PathBuf,
    /// Where: oci://HOST/REPO:TAG (HOST may end with :PORT).
    #[arg(value_name = "REFERENCE")]
    pub reference: String,
    /// How to reach the registry.
    #[command(flatten)]
    pub registry: OciArgs,
}

/// How `pull` and `push` reach a registry.
#[derive(Debug, Clone, Args)]
pub struct OciArgs {
    /// The user name to log in with (with --registry-password-env) [default: from
    /// ~/.docker/config.json, else anonymous].
    #[arg(long, value_name = "USER", requires = "registry_password_env")]
    pub registry_user: Option<String>,
    /// The environment variable holding the password or token for --registry-user
    /// (never the password itself on the command line, where `ps` shows it).
    #[arg(long, value_name = "VAR", requires = "registry_user")]
    pub registry_password_env: Option<String>,
    /// Speak plain HTTP to this registry (HOST or HOST:PORT; repeat for more). Loopback
    /// registries (127.0.0.1, ::1, localhost) always use plain HTTP; every other one
    /// HTTPS unless named here.
    #[arg(long, value_name = "HOST")]
    pub insecure_registry: Vec<String>,
    /// Largest component (layer) fetched; reading stops there.
    #[arg(long, value_name = "SIZE", default_value = "64MiB", value_parser = parse_size)]
    pub max_plugin_bytes: u64,
    /// Time limit of each request to the registry (connect, and each wait for data); a
    /// request that fails or times out is tried once more. A body must also end within
    /// this plus its size at 64 KiB/s.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_duration)]
    pub registry_timeout: Duration,
    /// Time limit of the whole pull or push: every request, body and retry of it
    /// (10 minutes carry 38 MiB at 64 KiB/s, the slowest rate accepted; raise it for a
    /// larger plugin over a slow link).
    #[arg(long, value_name = "DURATION", default_value = "10m", value_parser = parse_duration)]
    pub registry_deadline: Duration,
}
