//! Structured fuzzing of the engine: see `mcp_fuzz::ops` for the operations and invariants.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|ops: Vec<mcp_fuzz::ops::Op>| mcp_fuzz::ops::fuzz(&ops));
