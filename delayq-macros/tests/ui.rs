//! Compile-time behaviour of #[delay_listener], #[stream_listener], #[leader_task] and #[scheduled]: accepted shapes compile, and every rejected
//! form fails with its error on the offending span (expected output in tests/ui/fail/*.stderr).

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.pass("tests/ui/pass/*.rs");
    t.compile_fail("tests/ui/fail/*.rs");
}
