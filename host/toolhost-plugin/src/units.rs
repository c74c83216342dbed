//! Sizes and durations as a person writes them, for limit messages and logs: the core
//! crate's, so a plugin's limits read like a built-in tool's.

pub(crate) use toolhost::registry::{format_bytes, format_duration};
