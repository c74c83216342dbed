//! A real registry for the tests: Debian's `docker-registry` (the CNCF distribution
//! registry, 2.8) on 127.0.0.1 at a free port, with a temporary config and filesystem
//! storage, optionally behind htpasswd basic auth. And the `oras` client (oras-py).

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// The user and password of the registries started [`Registry::with_auth`].
pub(crate) const USER: &str = "ada";
/// See [`USER`].
pub(crate) const PASSWORD: &str = "toolhost-test-password";
/// bcrypt of [`PASSWORD`] (cost 5, made once with Python's bcrypt): the registry's
/// htpasswd only takes bcrypt.
const PASSWORD_BCRYPT: &str = "$2b$05$Ef0C728nOawyxRpgJsNeQeVSdTW0sLtNohletsFKOUQBRmx3dUIEO";

/// A running registry; stopped (its process killed) when dropped.
pub(crate) struct Registry {
    child: Child,
    /// `127.0.0.1:PORT`.
    pub(crate) address: String,
    _dir: tempfile::TempDir,
}

impl Registry {
    /// An open registry (anonymous pulls and pushes).
    pub(crate) fn start() -> Registry {
        Registry::launch(false)
    }

    /// A registry that wants [`USER`] and [`PASSWORD`] for everything.
    pub(crate) fn with_auth() -> Registry {
        Registry::launch(true)
    }

    fn launch(auth: bool) -> Registry {
        let binary = registry_binary();
        let dir = tempfile::tempdir().unwrap();
        let mut config = format!(
            "version: 0.1\nlog:\n  level: info\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: 127.0.0.1:0\n  secret: toolhost-test\n",
            dir.path().join("data").display()
        );
        if auth {
            let htpasswd = dir.path().join("htpasswd");
            std::fs::write(&htpasswd, format!("{USER}:{PASSWORD_BCRYPT}\n")).unwrap();
            config.push_str(&format!(
                "auth:\n  htpasswd:\n    realm: toolhost-test\n    path: {}\n",
                htpasswd.display()
            ));
        }
        let config_path = dir.path().join("config.yml");
        std::fs::write(&config_path, config).unwrap();
        let mut child = Command::new(&binary)
            .arg("serve")
            .arg(&config_path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|err| panic!("cannot start {}: {err}", binary.display()));
        // The registry logs "listening on 127.0.0.1:PORT"; its stderr is drained after.
        let stderr = child.stderr.take().unwrap();
        let (found, port) = mpsc::channel();
        std::thread::spawn(move || {
            let mut found = Some(found);
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let (Some(at), Some(_)) = (line.find("listening on 127.0.0.1:"), &found) {
                    let rest = &line[at + "listening on 127.0.0.1:".len()..];
                    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
                    let _ = found.take().unwrap().send(digits);
                }
            }
        });
        let Ok(port) = port.recv_timeout(Duration::from_secs(20)) else {
            let _ = child.kill();
            panic!(
                "{} did not say where it listens within 20 s",
                binary.display()
            );
        };
        Registry {
            child,
            address: format!("127.0.0.1:{port}"),
            _dir: dir,
        }
    }

    /// `oci://127.0.0.1:PORT/PATH`.
    pub(crate) fn oci(&self, path: &str) -> String {
        format!("oci://{}/{path}", self.address)
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `docker-registry`: `$TOOLHOST_DOCKER_REGISTRY`, else on the PATH. `scripts/test`
/// installs it (apt-get install docker-registry) when it is missing.
fn registry_binary() -> PathBuf {
    if let Some(path) = std::env::var_os("TOOLHOST_DOCKER_REGISTRY") {
        return PathBuf::from(path);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join("docker-registry"))
        .find(|candidate| candidate.is_file())
        .unwrap_or_else(|| {
            panic!(
                "docker-registry is not installed: run scripts/test (it installs it), or `apt-get install docker-registry`, or point TOOLHOST_DOCKER_REGISTRY at the binary"
            )
        })
}

/// The Python that has `oras` (oras-py): `$TOOLHOST_ORAS_PYTHON`, else the venv
/// `scripts/test` makes in `${TOOLHOST_TOOLS_CACHE:-${XDG_CACHE_HOME:-~/.cache}/wasm-toolhost-tools}/oras`.
pub(crate) fn oras_python() -> PathBuf {
    if let Some(path) = std::env::var_os("TOOLHOST_ORAS_PYTHON") {
        return PathBuf::from(path);
    }
    let cache = std::env::var_os("TOOLHOST_TOOLS_CACHE")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("XDG_CACHE_HOME")
                .map(|dir| PathBuf::from(dir).join("wasm-toolhost-tools"))
        })
        .or_else(|| {
            std::env::var_os("HOME").map(|home| {
                PathBuf::from(home)
                    .join(".cache")
                    .join("wasm-toolhost-tools")
            })
        })
        .unwrap_or_default();
    let python = cache.join("oras").join("venv").join("bin").join("python");
    assert!(
        python.is_file(),
        "{} is missing: run scripts/test (it makes a venv with oras from PyPI there), or point TOOLHOST_ORAS_PYTHON at a Python that has `pip install oras`",
        python.display()
    );
    python
}

/// Runs the oras-py helper (`oras_client.py`) with `args`; returns its stdout as JSON.
pub(crate) fn oras(args: &[&str], env: &[(&str, &str)]) -> serde_json::Value {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/cli/oci/oras_client.py");
    let mut command = Command::new(oras_python());
    command.arg(script).args(args).stdin(Stdio::null());
    for (name, value) in env {
        command.env(name, value);
    }
    let out = command.output().expect("run python");
    assert!(
        out.status.success(),
        "oras {args:?} failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|err| {
        panic!(
            "oras {args:?}: stdout is not JSON ({err}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}
