//! Tests of the plugin host against real components (filled in below).
