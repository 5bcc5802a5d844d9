//! Compile-time behaviour of #[delay_listener], #[stream_listener], #[leader_task] and
//! #[scheduled]: every rejected form fails with its error on the offending span (expected output
//! in tests/ui/fail/*.stderr). The accepted shapes are ordinary tests (tests/accepted.rs), so
//! trybuild only checks, never builds and runs, its project.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/fail/*.rs");
}
