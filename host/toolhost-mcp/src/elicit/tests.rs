//! Tests of the restricted schema and of the session's questions.
