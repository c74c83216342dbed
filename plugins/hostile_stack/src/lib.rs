//! `hostile_stack`: recurses without bound until the wasm call stack is exhausted
//! (wasmtime traps with a stack overflow).

use std::hint::black_box;

use toolhost_sdk::{export_plugin, schema, Env, Tool, ToolError};

#[derive(serde::Deserialize)]
struct Args {}

/// No address-taken locals, so the frames live on the wasm stack, not in linear memory:
/// the engine's stack limit is what stops it. `black_box` around the result keeps the call
/// out of tail position, so it cannot become a loop.
#[inline(never)]
fn dive(depth: u64) -> u64 {
    if black_box(depth) == u64::MAX {
        return 0;
    }
    black_box(dive(depth + 1)).wrapping_add(1)
}

fn recurse(_args: Args, _env: Env) -> Result<u64, ToolError> {
    Ok(dive(0))
}

export_plugin!(|| vec![Tool::new(
    "hostile_stack",
    "Recurses until the stack overflows (test plugin).",
    schema::object(Vec::<(&str, _)>::new(), Vec::<&str>::new()),
    recurse,
)]);
