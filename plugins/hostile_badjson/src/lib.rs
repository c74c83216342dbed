//! `hostile_badjson`: returns `{not json` as its result text.

use toolhost_sdk::{export_plugin, schema, Tool};

export_plugin!(|| vec![Tool::raw(
    "hostile_badjson",
    "Returns text that is not JSON (test plugin).",
    schema::object(Vec::<(&str, _)>::new(), Vec::<&str>::new()),
    |_arguments, _env| Ok("{not json".to_owned()),
)]);
