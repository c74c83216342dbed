//! Signed plugins against a real registry: `host keygen`, `host sign`, `host pull
//! --verify-key` (every refusal leaves the plugin directory as it was), `--require-signer`
//! at load, and interoperability both ways with an independent implementation of the
//! cosign format (`cosign_format.py`: Python's `cryptography`, plain HTTP and oras-py).

use std::path::Path;
use std::process::{Command, Stdio};

use super::registry::{oras_python, Registry};
use super::support::{fails, host, ok, outputs};
use crate::text;

/// Runs `cosign_format.py ARGS` with the test venv's Python; (success, stdout).
fn cosign_py(args: &[&str]) -> (bool, String) {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/cli/oci/cosign_format.py"
    );
    let out = Command::new(oras_python())
        .arg(script)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run python");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success() || args[0] == "verify",
        "cosign_format.py {args:?}: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), stdout)
}

/// Pushes the built greet plugin to `reference`; returns the manifest digest.
fn push_greet(reference: &str) -> String {
    let dist = tempfile::tempdir().unwrap();
    toolhost_tests::install(dist.path(), &["greet"]).unwrap();
    let stdout = ok(
        &["push", text(&dist.path().join("greet.wasm")), reference],
        &[],
    );
    stdout
        .lines()
        .find_map(|line| line.strip_prefix("digest "))
        .expect("push prints the digest")
        .to_owned()
}

/// Pushes greet with a manifest edited (so another digest) to `reference`.
fn push_other_greet(reference: &str) -> String {
    let dist = tempfile::tempdir().unwrap();
    toolhost_tests::install(dist.path(), &["greet"]).unwrap();
    let manifest = dist.path().join("greet.toml");
    let mut text_ = std::fs::read_to_string(&manifest).unwrap_or_default();
    text_.push_str("\n# another version\n");
    std::fs::write(&manifest, text_).unwrap();
    let stdout = ok(
        &["push", text(&dist.path().join("greet.wasm")), reference],
        &[],
    );
    stdout
        .lines()
        .find_map(|line| line.strip_prefix("digest "))
        .expect("push prints the digest")
        .to_owned()
}

fn files_of(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// `host keygen --out DIR/NAME EXTRA`: (private key path, public key path, fingerprint).
fn keygen(
    dir: &Path,
    name: &str,
    extra: &[&str],
    env: &[(&str, &str)],
) -> (String, String, String) {
    let prefix = dir.join(name);
    let mut args = vec!["keygen", "--out", text(&prefix)];
    args.extend_from_slice(extra);
    let stdout = ok(&args, env);
    let key = format!("{}.key", prefix.display());
    // The key is never printed.
    let secret = std::fs::read_to_string(&key).unwrap();
    assert!(!stdout.contains("PRIVATE KEY"), "{stdout}");
    assert!(
        !stdout.contains(&secret.lines().nth(1).unwrap()[..40]),
        "{stdout}"
    );
    let fingerprint = stdout
        .lines()
        .find_map(|line| line.strip_prefix("  fingerprint  "))
        .expect("keygen prints the fingerprint")
        .to_owned();
    (key, format!("{}.pub", prefix.display()), fingerprint)
}

/// The tools `host tools` lists for DIR with `extra` flags, and its stderr.
fn tools(dir: &Path, extra: &[&str]) -> (String, String) {
    let mut args = vec![
        "tools",
        "--no-builtins",
        "--no-cache",
        "--plugins",
        text(dir),
    ];
    args.extend_from_slice(extra);
    let out = host(&args, &[]);
    let (stdout, stderr) = outputs(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    (stdout, stderr)
}

#[test]
fn host_sign_then_a_verified_pull_loads_and_require_signer_accepts_it() {
    let registry = Registry::start();
    let keys = tempfile::tempdir().unwrap();
    let env = [("SIGNING_PASS", "correct horse battery")];
    let (key, public, _) = keygen(
        keys.path(),
        "team",
        &["--passphrase-env", "SIGNING_PASS"],
        &env,
    );
    let (_, other_public, _) = keygen(keys.path(), "other", &[], &[]);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&key).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
    assert!(std::fs::read_to_string(&key)
        .unwrap()
        .starts_with("-----BEGIN ENCRYPTED PRIVATE KEY-----"));
    // keygen never overwrites.
    let err = fails(&["keygen", "--out", text(&keys.path().join("team"))], &[]);
    assert!(
        err.contains("team.key exists; keygen does not overwrite keys"),
        "{err}"
    );

    let reference = registry.oci("tools/greet:1");
    let digest = push_greet(&reference);
    // Without the passphrase the key does not open.
    let err = fails(&["sign", &reference, "--key", &key], &[]);
    assert!(
        err.contains("the key is encrypted; give the environment variable"),
        "{err}"
    );
    // A key file others may read is warned about (and still used).
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let loose = keys.path().join("loose.key");
        std::fs::copy(&key, &loose).unwrap();
        std::fs::set_permissions(&loose, std::fs::Permissions::from_mode(0o644)).unwrap();
        let out = host(
            &[
                "sign",
                &reference,
                "--key",
                text(&loose),
                "--passphrase-env",
                "SIGNING_PASS",
            ],
            &env,
        );
        let (stdout, stderr) = outputs(&out);
        assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
        assert!(
            stderr.contains(
                "loose.key may be read or changed by users other than its owner (mode 644)"
            ),
            "{stderr}"
        );
    }
    let signed = ok(
        &[
            "sign",
            &reference,
            "--key",
            &key,
            "--passphrase-env",
            "SIGNING_PASS",
        ],
        &env,
    );
    assert!(
        signed.contains(&format!("  digest     {digest}\n")),
        "{signed}"
    );
    assert!(!signed.contains("PRIVATE"), "{signed}");

    // The independent implementation verifies host's signature.
    let repo = format!("{}/tools/greet", registry.address);
    let (verified, stdout) = cosign_py(&["verify", &repo, &digest, &public]);
    assert!(verified, "{stdout}");
    // Two signatures by the team key (the loose copy's and this one): host sign appends.
    assert_eq!(stdout.trim(), r#"{"verified": 2}"#);
    assert!(signed.contains("(2 signature(s))"), "{signed}");

    let plugins = tempfile::tempdir().unwrap();
    let pulled = ok(
        &[
            "pull",
            &reference,
            "--plugins",
            text(plugins.path()),
            "--verify-key",
            &public,
        ],
        &[],
    );
    assert!(pulled.contains("  signed by   sha256:"), "{pulled}");
    let lock = std::fs::read_to_string(plugins.path().join("plugins.lock")).unwrap();
    assert!(
        lock.contains("[plugin.signature]\nkey = \"sha256:"),
        "{lock}"
    );

    let (listed, stderr) = tools(plugins.path(), &["--require-signer", &public]);
    assert!(listed.contains("greet"), "{listed}\n{stderr}");
    // Another signer required: refused with the reason.
    let (listed, stderr) = tools(plugins.path(), &["--require-signer", &other_public]);
    assert!(!listed.contains("greet"), "{listed}");
    assert!(
        stderr.contains("which is not one of the --require-signer keys"),
        "{stderr}"
    );
}

#[test]
fn every_bad_signature_is_refused_and_nothing_is_installed() {
    let registry = Registry::start();
    let keys = tempfile::tempdir().unwrap();
    let (_, public, _) = keygen(keys.path(), "team", &[], &[]);
    let py_key = keys.path().join("py");
    cosign_py(&["keygen", text(&py_key)]);
    let py_private = format!("{}.key", py_key.display());
    let py_public = format!("{}.pub", py_key.display());
    let reference = registry.oci("tools/greet:1");
    let digest = push_greet(&reference);
    let other = push_other_greet(&registry.oci("tools/greet:2"));
    let repo = format!("{}/tools/greet", registry.address);
    let plugins = tempfile::tempdir().unwrap();
    let dir = text(plugins.path()).to_owned();
    let pull = |key: &str| {
        fails(
            &["pull", &reference, "--plugins", &dir, "--verify-key", key],
            &[],
        )
    };

    let err = pull(&py_public);
    assert!(
        err.contains(&format!(
            "({digest}) is not signed: the registry has no signature tag sha256-"
        )),
        "{err}"
    );

    let cases: &[(&str, &str, &str)] = &[
        // (how the signature is spoiled, the key pulled with, what the refusal says)
        ("", &public, "signature layer 1: its signature does not verify with the key(s) given"),
        ("flip", &py_public, "signature layer 1: its signature does not verify with the key(s) given"),
        ("payload", &py_public, "signature layer 1: its signature does not verify with the key(s) given"),
        ("base64", &py_public, "signature layer 1: its signature annotation is not base64"),
        ("huge", &py_public, "signature layer 1: its payload declares 1 GiB, over the limit of 64 KiB for a signature payload; not read"),
        ("annotation-elsewhere", &py_public, "signature layer 2: it carries a signature annotation, but its media type is application/octet-stream"),
        ("layers:10000", &py_public, "has 10000 layers, over the limit of 64"),
        ("self", &py_public, "points to the signed manifest itself"),
    ];
    for (mode, key, expected) in cases {
        cosign_py(&["sign", &repo, &digest, &py_private, mode]);
        let err = pull(key);
        assert!(err.contains(expected), "{mode}: {err}");
        assert_eq!(files_of(plugins.path()), Vec::<String>::new(), "{mode}");
    }
    let moved = format!("other-digest:{other}");
    cosign_py(&["sign", &repo, &digest, &py_private, &moved]);
    let err = pull(&py_public);
    assert!(
        err.contains(&format!(
            "signature layer 1: it signs {other}, not the manifest pulled ({digest})"
        )),
        "{err}"
    );
    assert_eq!(files_of(plugins.path()), Vec::<String>::new());

    // The independent signer's good signature, pushed with oras-py, verifies (and so
    // does an Ed25519 one pushed over plain HTTP).
    let (_, pushed) = cosign_py(&["sign", &repo, &digest, &py_private, "oras"]);
    assert!(pushed.contains("\"pushed_with\": \"oras\""), "{pushed}");
    let pulled = ok(
        &[
            "pull",
            &reference,
            "--plugins",
            &dir,
            "--verify-key",
            &py_public,
        ],
        &[],
    );
    assert!(pulled.contains("signed by   sha256:"), "{pulled}");
    let ed = keys.path().join("ed");
    cosign_py(&["keygen", text(&ed), "ed25519"]);
    cosign_py(&["sign", &repo, &other, &format!("{}.key", ed.display())]);
    let ed_dir = tempfile::tempdir().unwrap();
    let pulled = ok(
        &[
            "pull",
            &registry.oci("tools/greet:2"),
            "--plugins",
            text(ed_dir.path()),
            "--verify-key",
            &public,
            "--verify-key",
            &format!("{}.pub", ed.display()),
        ],
        &[],
    );
    assert!(pulled.contains("(Ed25519)"), "{pulled}");
}

#[test]
fn update_verifies_with_the_recorded_key_and_require_signer_refuses_what_is_not_signed() {
    let registry = Registry::start();
    let keys = tempfile::tempdir().unwrap();
    let (key, public, team_fingerprint) = keygen(keys.path(), "team", &["--ed25519"], &[]);
    let (other_key, other_public, other_fingerprint) = keygen(keys.path(), "other", &[], &[]);
    let reference = registry.oci("tools/greet:1");
    push_greet(&reference);
    ok(&["sign", &reference, "--key", &key], &[]);
    let plugins = tempfile::tempdir().unwrap();
    let dir = text(plugins.path()).to_owned();
    ok(
        &[
            "pull",
            &reference,
            "--plugins",
            &dir,
            "--verify-key",
            &public,
        ],
        &[],
    );
    let lock_path = plugins.path().join("plugins.lock");
    let lock = std::fs::read_to_string(&lock_path).unwrap();

    // The tag moves to an unsigned version: --update verifies with the recorded key.
    let moved = push_other_greet(&reference);
    let err = fails(&["pull", &reference, "--plugins", &dir, "--update"], &[]);
    assert!(err.contains(&format!("({moved}) is not signed")), "{err}");
    assert_eq!(std::fs::read_to_string(&lock_path).unwrap(), lock);
    // Signed by another key: still refused with the recorded one.
    ok(&["sign", &reference, "--key", &other_key], &[]);
    let err = fails(&["pull", &reference, "--plugins", &dir, "--update"], &[]);
    assert!(
        err.contains("its signature does not verify with the key(s) given"),
        "{err}"
    );
    ok(&["sign", &reference, "--key", &key], &[]);
    ok(&["pull", &reference, "--plugins", &dir, "--update"], &[]);

    // A lock edited to claim the other signer (its fingerprint and public key): the
    // signature the lock keeps is the team's, and does not verify with the other key.
    let current = std::fs::read_to_string(&lock_path).unwrap();
    assert!(
        current.contains(&format!("key = \"{team_fingerprint}\"")),
        "{current}"
    );
    let other_pem = std::fs::read_to_string(&other_public).unwrap();
    let other_der: String = other_pem
        .lines()
        .filter(|line| !line.starts_with("-----"))
        .collect();
    let team_der = current
        .lines()
        .find_map(|line| line.strip_prefix("public_key = \""))
        .unwrap()
        .trim_end_matches('"')
        .to_owned();
    let forged = current
        .replace(&team_fingerprint, &other_fingerprint)
        .replace(&team_der, &other_der);
    std::fs::write(&lock_path, forged).unwrap();
    let (listed, stderr) = tools(plugins.path(), &["--require-signer", &other_public]);
    assert!(!listed.contains("greet"), "{listed}");
    assert!(
        stderr.contains("--require-signer: the signature the lock keeps does not hold: its signature does not verify"),
        "{stderr}"
    );
    std::fs::write(&lock_path, &current).unwrap();

    // A component copied in by hand: not in the lock.
    let dist = tempfile::tempdir().unwrap();
    toolhost_tests::install(dist.path(), &["greet"]).unwrap();
    std::fs::copy(
        dist.path().join("greet.wasm"),
        plugins.path().join("copied.wasm"),
    )
    .unwrap();
    let (listed, stderr) = tools(plugins.path(), &["--require-signer", &public]);
    assert!(listed.contains("greet"), "{listed}");
    assert!(
        stderr.contains("copied.wasm") && stderr.contains("it is not listed in the lock file"),
        "{stderr}"
    );
    // Pinned by `host lock` (no signer): refused under --require-signer.
    ok(&["lock", "--plugins", &dir], &[]);
    let (listed, stderr) = tools(plugins.path(), &["--require-signer", &public]);
    assert!(listed.contains("greet"), "{listed}");
    assert!(
        stderr.contains(
            "--require-signer: its lock entry names no signer (it was not pulled with --verify-key"
        ),
        "{stderr}"
    );
    // No lock at all.
    let bare = tempfile::tempdir().unwrap();
    let err = fails(
        &[
            "tools",
            "--plugins",
            text(bare.path()),
            "--require-signer",
            &public,
        ],
        &[],
    );
    assert!(
        err.contains("--require-signer: ")
            && err.contains("does not exist, so no plugin has a signer"),
        "{err}"
    );
}
