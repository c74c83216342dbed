//! The `read_file` tool (not written yet).

use std::sync::Arc;

use super::FileTools;
use crate::registry::{RegisterError, Registry};

/// Registers `read_file`.
pub(super) fn register(_registry: &Registry, _tools: &Arc<FileTools>) -> Result<(), RegisterError> {
    Ok(())
}
