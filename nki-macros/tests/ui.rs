//! Compile-fail tests: every `#[kernel]` mistake is a compile error pointing at the offending
//! tokens. Regenerate the `.stderr` files with `TRYBUILD=overwrite cargo test -p nki-macros --test ui`.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
    t.pass("tests/ui/pass/*.rs");
}
