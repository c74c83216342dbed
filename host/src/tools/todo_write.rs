//! The plan tool `todo_write` (not written yet).

use crate::registry::{RegisterError, Registry};

/// Registers `todo_write`.
///
/// # Errors
/// [`RegisterError::DuplicateTool`] when `todo_write` is already registered.
pub fn register_plan_tool(_registry: &Registry) -> Result<(), RegisterError> {
    Ok(())
}
