//! `hostile_alloc`: allocates 1 MiB chunks, touching every page, until the host's memory
//! cap refuses to grow memory (the allocation failure then aborts the instance).

use std::hint::black_box;

use toolhost_sdk::{export_plugin, schema, Env, Tool, ToolError};

const CHUNK: usize = 1 << 20;
const PAGE: usize = 64 << 10;

#[derive(serde::Deserialize)]
struct Args {}

fn hoard(_args: Args, _env: Env) -> Result<String, ToolError> {
    let mut chunks: Vec<Vec<u8>> = Vec::new();
    loop {
        let mut chunk = vec![0u8; CHUNK];
        for offset in (0..CHUNK).step_by(PAGE) {
            chunk[offset] = 1;
        }
        chunks.push(black_box(chunk));
    }
}

export_plugin!(|| vec![Tool::new(
    "hostile_alloc",
    "Allocates memory until it is stopped (test plugin).",
    schema::object(Vec::<(&str, _)>::new(), Vec::<&str>::new()),
    hoard,
)]);
