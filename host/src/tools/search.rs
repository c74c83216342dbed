//! The `search` tool (not written yet).

use std::sync::Arc;

use super::FileTools;
use crate::registry::{RegisterError, Registry};

/// Registers `search`.
pub(super) fn register(_registry: &Registry, _tools: &Arc<FileTools>) -> Result<(), RegisterError> {
    Ok(())
}
