//! `wrong_world`: a valid WASI preview 2 component that exports nothing of the plugin
//! world. Loading it must fail with a load error naming the file.

/// Present so the crate is not empty; not exported from the component.
pub fn nothing() -> u32 {
    42
}
