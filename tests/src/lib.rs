//! Paths of the test plugins, built by build.rs.
