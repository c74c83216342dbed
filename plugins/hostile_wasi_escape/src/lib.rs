//! `hostile_wasi_escape`: tries to reach the host through plain WASI, past the host's
//! sandbox (no preopened directory, no socket, no env var, no argument, no stdin).
//!
//! Arguments (all optional): `path` (file to read, default `/etc/passwd`), `write_path`
//! (file to create, default `/tmp/toolhost-wasi-escape.txt`), `connect` (TCP address,
//! default `127.0.0.1:1`). The result is an object with one entry per attempt, each
//! `{"escaped": bool, "detail": string}`; in a correct sandbox every `escaped` is false.
//! Keys: `read_file`, `read_dir_root`, `read_dir_cwd`, `write_file`, `env_vars`, `args`,
//! `stdin`, `tcp_connect`.

use std::io::Read;

use serde_json::{json, Value};
use toolhost_sdk::{export_plugin, schema, Env, Tool, ToolError};

#[derive(serde::Deserialize)]
struct Args {
    #[serde(default = "default_path")]
    path: String,
    #[serde(default = "default_write_path")]
    write_path: String,
    #[serde(default = "default_connect")]
    connect: String,
}

fn default_path() -> String {
    "/etc/passwd".to_owned()
}

fn default_write_path() -> String {
    "/tmp/toolhost-wasi-escape.txt".to_owned()
}

fn default_connect() -> String {
    "127.0.0.1:1".to_owned()
}

fn outcome(escaped: bool, detail: impl Into<String>) -> Value {
    json!({ "escaped": escaped, "detail": detail.into() })
}

fn from_io<T>(result: std::io::Result<T>, describe: impl FnOnce(T) -> (bool, String)) -> Value {
    match result {
        Ok(value) => {
            let (escaped, detail) = describe(value);
            outcome(escaped, detail)
        }
        Err(error) => outcome(false, format!("error: {error}")),
    }
}

fn list_dir(path: &str) -> Value {
    from_io(std::fs::read_dir(path), |entries| {
        let names: Vec<String> = entries
            .filter_map(Result::ok)
            .map(|entry| entry.file_name().to_string_lossy().into_owned())
            .collect();
        (
            true,
            format!("listed {} entries: {}", names.len(), names.join(", ")),
        )
    })
}

fn escape(args: Args, _env: Env) -> Result<Value, ToolError> {
    let read_file = from_io(std::fs::read(&args.path), |bytes| {
        (true, format!("read {} bytes", bytes.len()))
    });
    let write_file = from_io(std::fs::write(&args.write_path, b"escaped\n"), |()| {
        (true, format!("wrote {}", args.write_path))
    });
    let vars: Vec<String> = std::env::vars_os()
        .map(|(name, _)| name.to_string_lossy().into_owned())
        .collect();
    let env_vars = outcome(
        !vars.is_empty(),
        format!("{} variables: {}", vars.len(), vars.join(", ")),
    );
    let argv: Vec<String> = std::env::args_os()
        .map(|arg| arg.to_string_lossy().into_owned())
        .collect();
    let args_seen = outcome(
        !argv.is_empty(),
        format!("{} arguments: {}", argv.len(), argv.join(" ")),
    );
    let mut input = Vec::new();
    let stdin = from_io(std::io::stdin().read_to_end(&mut input), |n| {
        (n > 0, format!("read {n} bytes"))
    });
    let tcp_connect = from_io(std::net::TcpStream::connect(&args.connect), |stream| {
        (true, format!("connected to {:?}", stream.peer_addr().ok()))
    });
    Ok(json!({
        "read_file": read_file,
        "read_dir_root": list_dir("/"),
        "read_dir_cwd": list_dir("."),
        "write_file": write_file,
        "env_vars": env_vars,
        "args": args_seen,
        "stdin": stdin,
        "tcp_connect": tcp_connect,
    }))
}

export_plugin!(|| vec![Tool::new(
    "hostile_wasi_escape",
    "Tries to reach host files, environment, arguments, stdin and network through WASI \
     (test plugin).",
    schema::object(
        [
            (
                "path",
                schema::string("File to read (default /etc/passwd).")
            ),
            ("write_path", schema::string("File to create.")),
            (
                "connect",
                schema::string("TCP address to connect to (default 127.0.0.1:1).")
            ),
        ],
        Vec::<&str>::new(),
    ),
    escape,
)]);
