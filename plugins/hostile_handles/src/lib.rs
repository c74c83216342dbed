//! `hostile_handles`: asks the host for a new stdout stream (`wasi:cli/stdout.get-stdout`,
//! a fresh entry in the host's resource table each time) in a loop and never drops one,
//! so the host's handle table would grow in host memory, outside the plugin's memory
//! cap. The host must stop it at its handle cap (`host handles (N)`), not grow.
//!
//! The import is declared by hand: std for wasm32-wasip2 already imports
//! `wasi:cli/stdout@0.2.6`, so the component keeps that interface's type, but std only
//! calls `get-stdout` once.

use toolhost_sdk::{export_plugin, schema, Env, Tool, ToolError};

#[link(wasm_import_module = "wasi:cli/stdout@0.2.6")]
extern "C" {
    /// Returns the handle of a new `output-stream` resource (owned by the guest).
    #[link_name = "get-stdout"]
    fn get_stdout() -> i32;
}

#[derive(serde::Deserialize)]
struct Args {}

fn leak(_args: Args, _env: Env) -> Result<String, ToolError> {
    let mut handles: u64 = 0;
    loop {
        // SAFETY: `get-stdout` takes nothing and returns a handle number; the handle is
        // deliberately never dropped.
        let handle = unsafe { get_stdout() };
        handles = std::hint::black_box(handles + u64::from(handle != 0));
    }
}

export_plugin!(|| vec![Tool::new(
    "hostile_handles",
    "Creates host handles in a loop without dropping them (test plugin).",
    schema::object(Vec::<(&str, _)>::new(), Vec::<&str>::new()),
    leak,
)]);
