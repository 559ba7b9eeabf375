//! Structured fuzzing of Streamable HTTP: see `mcp_fuzz::http_ops` for the operations and
//! invariants.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: mcp_fuzz::http_ops::Input| mcp_fuzz::http_ops::fuzz(&input));
