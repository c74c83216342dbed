//! End to end: pins (`host lock`, `--require-lock`), and shipping plugins
//! through a real OCI registry (`host push`, `host pull`), spawning the `host` binary.
//!
//! The registry tests start Debian's `docker-registry` (the CNCF distribution registry)
//! on 127.0.0.1 at a free port with a temporary config; `scripts/test` installs it when
//! missing. The interoperability tests drive `oras` (oras-py, from PyPI) from a venv that
//! `scripts/test` prepares (see [`registry::oras_python`]).

mod interop;
mod lock;
mod registry;
mod ship;
mod signing;
mod support;
