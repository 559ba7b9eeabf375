//! Bad uses of `#[tool]` and `#[tools]` fail to compile with a message that says what to do;
//! each case in `ui/` is compiled and its errors compared with the `.stderr` beside it
//! (`TRYBUILD=overwrite cargo test -p mcp-macros` rewrites them after a deliberate change).

#[test]
fn bad_uses_say_what_to_do() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/ui/*.rs");
}
