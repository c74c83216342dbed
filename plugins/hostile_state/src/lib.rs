//! `hostile_state`: keeps the `value` of each call in a static and returns the one it
//! kept before (`nothing kept` when there is none). Were an instance reused across
//! calls, one caller's value would reach the next caller: the host's tests check that a
//! principal never sees another's (a fresh instance per call).

use std::sync::Mutex;

use toolhost_sdk::{export_plugin, schema, Env, Tool, ToolError};

static KEPT: Mutex<Option<String>> = Mutex::new(None);

#[derive(serde::Deserialize)]
struct Args {
    value: String,
}

fn remember(args: Args, _env: Env) -> Result<String, ToolError> {
    let mut kept = KEPT
        .lock()
        .map_err(|_| ToolError::failed("the kept value's lock is poisoned"))?;
    let before = kept.replace(args.value);
    Ok(before.unwrap_or_else(|| "nothing kept".to_owned()))
}

export_plugin!(|| vec![Tool::new(
    "hostile_state",
    "Keeps `value`; returns the value kept before (test plugin).",
    schema::object([("value", schema::string("What to keep."))], ["value"]),
    remember,
)]);
