//! URL forms whose password still shows after the one-redaction rewrite.
//! The connection layer (redis 1.8.1, `url::Url::query_pairs`) reads a unix socket's password
//! from the `pass` query value up to the next `&` (a `,` or `@` is part of it) and
//! percent-decodes the key; redact_url stops the value at `,`, takes an `@` anywhere for
//! userinfo, and compares the key undecoded.

use delayq_core::protocol::redact_url;
use delayq_runtime::Producer;

const S2: &str = "tail-9f3e-SECRET";

#[test]
fn unix_socket_passwords_with_comma_at_or_encoded_key_are_hidden() {
    let cases = [
        format!("redis+unix:///run/redis.sock?pass=head,{S2}"),
        format!("redis+unix:///run/redis.sock?db=1&pass=head@{S2}"),
        format!("redis+unix:///run/redis.sock?%70ass={S2}"),
    ];
    let mut leaks = Vec::new();
    for url in &cases {
        let shown = redact_url(url);
        if shown.contains(S2) {
            leaks.push(format!("{url}  ->  {shown}"));
        }
    }
    assert!(
        leaks.is_empty(),
        "the password shows:\n{}",
        leaks.join("\n")
    );
}

/// The same URLs through a real connect error (a socket that does not exist): the error's
/// Display and Debug, which end up in logs and the CLI's output.
#[tokio::test]
async fn a_connect_error_on_such_a_url_does_not_show_the_password() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("none.sock");
    let mut leaks = Vec::new();
    for url in [
        format!("redis+unix://{}?pass=head,{S2}", sock.display()),
        format!("redis+unix://{}?pass=head@{S2}", sock.display()),
        format!("redis+unix://{}?%70ass={S2}", sock.display()),
    ] {
        let err = Producer::connect(&url).await.map(|_| ()).unwrap_err();
        let text = format!("{err} / {err:?}");
        if text.contains(S2) {
            leaks.push(format!("{url}\n   -> {text}"));
        }
    }
    assert!(
        leaks.is_empty(),
        "the password shows:\n{}",
        leaks.join("\n")
    );
}
