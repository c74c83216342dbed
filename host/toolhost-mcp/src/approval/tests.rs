//! Tests of the approval prompt and policy.
