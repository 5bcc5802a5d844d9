//! Refused writes leave an audit line (issue 50, item 7), on the sink the done ones use (the
//! dashboard's stdout), rate-bounded: at most 20 refusals a minute are written, then one line
//! says the next are counted, not written (the count follows when the minute is over). A
//! line names the route, never its query or a token.

use std::time::Duration;

use delayq_dev::{producer, wait_until, RedisServer, Service};

use crate::dashboard_kit::{authority, dashboard, raw};

const TOKEN: &str = "s3cret-token-0123456789";
/// Refusal lines written a minute at most (`delayq-cli/src/dashboard/refusals.rs`).
const PER_MINUTE: usize = 20;

/// Where, which path, with which headers, the status it gets, and a word of its refusal.
type Try<'a> = (&'a str, &'a str, Vec<(&'a str, &'a str)>, u16, &'a str);

fn audit_lines(board: &Service) -> Vec<String> {
    board
        .later_lines()
        .into_iter()
        .filter(|l| l.starts_with("audit: "))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_writes_are_audited_and_bounded() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    p.send("dash.refused", &1u8, Duration::from_secs(600))
        .await
        .unwrap();
    let board = dashboard(
        &server.url(),
        "127.0.0.1:0",
        &["--allow-writes"],
        Some(TOKEN),
    );
    let read_only = dashboard(&server.url(), "127.0.0.1:0", &[], Some(TOKEN));
    let (addr, ro_addr) = (authority(&board), authority(&read_only));
    let bearer = format!("Bearer {TOKEN}");
    let wrong = "Bearer not-the-token-but-a-guess";
    let confirm = ("X-Delayq-Confirm", "yes");
    let pause = "/api/topics/dash.refused/flow/pause";
    let with_secret = "/api/topics/dash.refused/flow/pause?token=leaked-in-a-url";
    let host = ("Host", addr.as_str());
    let tries: [Try; 5] = [
        (
            &addr,
            pause,
            vec![
                host,
                ("Authorization", bearer.as_str()),
                confirm,
                ("Origin", "https://evil.example"),
            ],
            403,
            "own page",
        ),
        (
            &addr,
            pause,
            vec![host, ("Authorization", bearer.as_str())],
            400,
            "confirmed",
        ),
        (
            &addr,
            with_secret,
            vec![host, ("Authorization", wrong), confirm],
            401,
            "token",
        ),
        (
            &addr,
            pause,
            vec![
                ("Host", "evil.example"),
                ("Authorization", bearer.as_str()),
                confirm,
            ],
            421,
            "answers to",
        ),
        (
            &ro_addr,
            pause,
            vec![
                ("Host", ro_addr.as_str()),
                ("Authorization", bearer.as_str()),
                confirm,
            ],
            403,
            "read-only",
        ),
    ];
    for (at, path, headers, status, _) in &tries {
        let reply = raw(at, "POST", path, headers, "");
        assert_eq!(reply.status, *status, "{path} {headers:?}: {reply:?}");
    }
    // A read refused is no write: no line.
    let reply = raw(&addr, "GET", "/api/overview", &[host], "");
    assert_eq!(reply.status, 401);
    wait_until(Duration::from_secs(10), "the refusal lines", || {
        audit_lines(&board).len() >= 4 && !audit_lines(&read_only).is_empty()
    })
    .await;
    let (lines, ro_lines) = (audit_lines(&board), audit_lines(&read_only));
    assert_eq!(lines.len(), 4, "{lines:#?}");
    assert_eq!(ro_lines.len(), 1, "{ro_lines:#?}");
    for (line, (_, _, _, status, why)) in lines.iter().chain(&ro_lines).zip(&tries) {
        assert!(line.starts_with("audit: 20"), "{line}");
        assert!(line.contains("127.0.0.1:"), "{line}");
        assert!(
            line.contains("refused POST /api/topics/dash.refused/flow/pause"),
            "{line}"
        );
        assert!(line.contains(&format!(": {status} ")), "{line}");
        assert!(line.contains(why), "{line}");
        for secret in [TOKEN, "not-the-token", "leaked-in-a-url"] {
            assert!(!line.contains(secret), "a secret in the log: {line}");
        }
    }
    assert!(!p.is_paused("dash.refused").await.unwrap());

    // A flood of refusals: 20 lines in the minute, then one that says the rest are counted.
    let flood = 3 * PER_MINUTE;
    for _ in 0..flood {
        let reply = raw(
            &addr,
            "POST",
            pause,
            &[host, ("Authorization", wrong), confirm],
            "",
        );
        assert_eq!(reply.status, 401);
    }
    // The done write after the flood is still written: a refusal flood hides no real write.
    let headers = [host, ("Authorization", bearer.as_str()), confirm];
    assert_eq!(raw(&addr, "POST", pause, &headers, "").status, 200);
    wait_until(Duration::from_secs(10), "the paused line", || {
        audit_lines(&board)
            .iter()
            .any(|l| l.ends_with("pause dash.refused: paused"))
    })
    .await;
    let lines = audit_lines(&board);
    let refused = lines
        .iter()
        .filter(|l| l.contains(" refused POST "))
        .count();
    let notices: Vec<&String> = lines.iter().filter(|l| l.contains("not written")).collect();
    assert_eq!(refused, PER_MINUTE, "{lines:#?}");
    assert_eq!(notices.len(), 1, "{lines:#?}");
    assert!(
        notices[0].contains("more than 20 refused writes"),
        "{}",
        notices[0]
    );
}
