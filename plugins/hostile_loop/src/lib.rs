//! `hostile_loop`: spins forever without yielding. The host must stop it at its deadline
//! (epoch interruption), not wait for it.

use std::hint::black_box;

use toolhost_sdk::{export_plugin, schema, Env, Tool, ToolError};

#[derive(serde::Deserialize)]
struct Args {}

fn spin(_args: Args, _env: Env) -> Result<String, ToolError> {
    let mut counter: u64 = 0;
    loop {
        // black_box keeps the loop from being optimised into nothing (or into UB).
        counter = black_box(counter.wrapping_add(1));
    }
}

export_plugin!(|| vec![Tool::new(
    "hostile_loop",
    "Spins forever (test plugin).",
    schema::object(Vec::<(&str, _)>::new(), Vec::<&str>::new()),
    spin,
)]);
