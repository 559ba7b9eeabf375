//! Nothing of its own: the README, whose examples `cargo test --doc` compiles and runs with
//! only the Install section's dependencies.
#![doc = include_str!("../../../README.md")]
