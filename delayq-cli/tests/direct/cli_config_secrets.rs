//! `delayq config check` prints a unix socket URL's password when it holds an `@`
//! (redis 1.8 reads `pass` up to the next `&`; redact_url takes the last `@` for userinfo).

use crate::common::delayq;

#[test]
fn config_check_does_not_print_a_unix_socket_password() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("delayq.toml");
    std::fs::write(
        &file,
        "redis_url = \"redis+unix:///run/redis.sock?db=1&pass=head@tail-9f3e-SECRET\"\n",
    )
    .unwrap();
    let path = file.to_str().unwrap();
    for args in [
        vec!["config", "check", path],
        vec!["--json", "config", "check", path],
    ] {
        let run = delayq("redis://127.0.0.1:1", &args);
        assert!(
            !run.stdout.contains("tail-9f3e-SECRET") && !run.stderr.contains("tail-9f3e-SECRET"),
            "delayq {args:?} shows the password:\n{}{}",
            run.stdout,
            run.stderr
        );
    }
}
