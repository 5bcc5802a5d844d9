//! The dashboard's bounds (issue 50, items 5 and 6): a connection that sends no request head
//! is closed after the head timeout (10 s), a flood of idle connections is held to the cap
//! (64, the oldest idle closed first) while the operator is still answered, a body that never
//! arrives is answered 408, and no other site may frame any of its answers.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use delayq_dev::{producer, RedisServer};

use crate::dashboard_kit::{authority, dashboard, raw};

/// The dashboard's head timeout and connection cap (`delayq-cli/src/dashboard/listen.rs`).
const HEAD_TIMEOUT: Duration = Duration::from_secs(10);
const CAP: usize = 64;

/// Whether the server has closed `s` (EOF or a reset), looking for at most `wait`.
fn closed_by_server(s: &mut TcpStream, wait: Duration) -> bool {
    s.set_read_timeout(Some(wait)).unwrap();
    let mut buf = [0u8; 512];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue, // an answer (a 408) before the close
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return false
            }
            Err(_) => return true,
        }
    }
}

#[test]
fn a_connection_without_a_request_head_is_closed_after_the_head_timeout() {
    let server = RedisServer::start();
    let board = dashboard(&server.url(), "127.0.0.1:0", &[], None);
    let addr = authority(&board);
    let opened = Instant::now();
    let mut silent = TcpStream::connect(&addr).unwrap();
    // A slow client: half a head, then nothing.
    let mut slow = TcpStream::connect(&addr).unwrap();
    slow.write_all(format!("GET /api/overview HTTP/1.1\r\nHost: {addr}\r\n").as_bytes())
        .unwrap();
    // Generous: closed well within three times the timeout; before it, never.
    let limit = HEAD_TIMEOUT * 3;
    assert!(
        closed_by_server(&mut silent, limit),
        "an idle connection still open after {limit:?}"
    );
    assert!(
        closed_by_server(&mut slow, limit),
        "half a head still open after {limit:?}"
    );
    assert!(
        opened.elapsed() >= HEAD_TIMEOUT - Duration::from_millis(500),
        "closed after {:?}, before the head timeout",
        opened.elapsed()
    );
    // The operator's request is answered all the while.
    let reply = raw(&addr, "GET", "/api/overview", &[("Host", &addr)], "");
    assert_eq!(reply.status, 200, "{reply:?}");
}

#[test]
fn a_flood_of_idle_connections_is_held_to_the_cap_and_the_operator_is_answered() {
    let server = RedisServer::start();
    let board = dashboard(&server.url(), "127.0.0.1:0", &[], None);
    let addr = authority(&board);
    let flood = 4 * CAP;
    let started = Instant::now();
    let mut idle: Vec<TcpStream> = (0..flood)
        .map(|_| TcpStream::connect(&addr).unwrap())
        .collect();
    // The operator: answered at once, past the flood.
    let reply = raw(&addr, "GET", "/api/overview", &[("Host", &addr)], "");
    assert_eq!(reply.status, 200, "{reply:?}");
    // The server holds at most CAP of the flood: all but the newest are closed, and (seen
    // before any could have timed out) by the cap, not by the head timeout.
    let mut closed = 0;
    for s in &mut idle {
        if closed_by_server(s, Duration::from_millis(200)) {
            closed += 1;
        }
        if closed >= flood - CAP {
            break;
        }
    }
    let seen_after = started.elapsed();
    assert!(
        closed >= flood - CAP,
        "{closed} of {flood} idle connections closed; the cap is {CAP}"
    );
    assert!(
        seen_after < HEAD_TIMEOUT - Duration::from_secs(1),
        "this machine took {seen_after:?}: too slow to tell the cap from the head timeout"
    );
}

/// A write whose body never comes is answered 408 once the body's time is up (its connection
/// is not held busy for good), and while such writes fill every slot, a new connection is
/// closed at once rather than queued: the operator is answered as soon as they time out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_never_arrives_is_answered_408_and_frees_its_connection() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    p.send("dash.body", &1u8, Duration::from_secs(600))
        .await
        .unwrap();
    let board = dashboard(&server.url(), "127.0.0.1:0", &["--allow-writes"], None);
    let addr = authority(&board);
    let head = format!(
        "POST /api/topics/dash.body/send HTTP/1.1\r\nHost: {addr}\r\nX-Delayq-Confirm: yes\r\n\
         Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"payload\":"
    );
    let mut stuck: Vec<TcpStream> = (0..CAP + 8)
        .map(|_| {
            let mut s = TcpStream::connect(&addr).unwrap();
            s.write_all(head.as_bytes()).unwrap();
            s
        })
        .collect();
    // Each is answered 408 (a generous bound: the body's 10 s, four times, for all).
    let deadline = Instant::now() + Duration::from_secs(40);
    let mut answers = Vec::new();
    for s in &mut stuck {
        let left = deadline.saturating_duration_since(Instant::now());
        s.set_read_timeout(Some(left.max(Duration::from_millis(50))))
            .unwrap();
        let mut reply = String::new();
        let _ = s.read_to_string(&mut reply);
        answers.push(
            reply
                .split_whitespace()
                .nth(1)
                .unwrap_or("none")
                .to_string(),
        );
    }
    let timed_out = answers.iter().filter(|a| *a == "408").count();
    // Those past the cap were closed unanswered; every one held was answered 408.
    assert!(timed_out >= CAP, "answers: {answers:?}");
    assert!(
        answers.iter().all(|a| a == "408" || a == "none"),
        "{answers:?}"
    );
    let reply = raw(&addr, "GET", "/api/overview", &[("Host", &addr)], "");
    assert_eq!(reply.status, 200, "{reply:?}");
    let c = p.counts("dash.body").await.unwrap();
    assert_eq!(c.delayed, 1, "no half-sent message was sent");
}

/// Every answer, the page's, the API's, a refusal, a route that does not exist, forbids
/// framing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_answer_forbids_framing() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    p.send("dash.frame", &1u8, Duration::from_secs(600))
        .await
        .unwrap();
    let token = "s3cret-token-0123456789";
    let board = dashboard(
        &server.url(),
        "127.0.0.1:0",
        &["--allow-writes"],
        Some(token),
    );
    let addr = authority(&board);
    let bearer = format!("Bearer {token}");
    let (host, auth, confirm) = (
        ("Host", addr.as_str()),
        ("Authorization", bearer.as_str()),
        ("X-Delayq-Confirm", "yes"),
    );
    let pause = "/api/topics/dash.frame/flow/pause";
    let answers = [
        raw(&addr, "GET", "/", &[host], ""),
        raw(&addr, "GET", "/api/overview", &[host, auth], ""),
        raw(&addr, "GET", "/api/overview", &[host], ""),
        raw(
            &addr,
            "GET",
            "/api/overview",
            &[("Host", "evil.example"), auth],
            "",
        ),
        raw(&addr, "GET", "/api/nowhere", &[host, auth], ""),
        raw(&addr, "GET", "/nowhere", &[host], ""),
        raw(&addr, "POST", pause, &[host, auth], ""),
        raw(
            &addr,
            "POST",
            pause,
            &[host, auth, confirm, ("Origin", "https://evil.example")],
            "",
        ),
        raw(&addr, "POST", pause, &[host, auth, confirm], ""),
        raw(&addr, "DELETE", "/api/overview", &[host, auth, confirm], ""),
    ];
    let statuses: Vec<u16> = answers.iter().map(|a| a.status).collect();
    assert_eq!(statuses, [200, 200, 401, 421, 404, 404, 400, 403, 200, 405]);
    for a in &answers {
        assert_eq!(a.all("x-frame-options"), ["DENY"], "{a:?}");
        let policy = a.all("content-security-policy");
        assert_eq!(policy.len(), 1, "{a:?}");
        assert!(policy[0].contains("frame-ancestors 'none'"), "{a:?}");
    }
    assert!(p.is_paused("dash.frame").await.unwrap());
}

/// The operator's `GET /api/overview` with `token`: its status, or `None` when the connection
/// was closed unanswered.
fn operator(addr: &str, token: &str) -> Option<u16> {
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let request = format!(
        "GET /api/overview HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n"
    );
    s.write_all(request.as_bytes()).ok()?;
    let mut bytes = Vec::new();
    let _ = s.read_to_end(&mut bytes);
    String::from_utf8_lossy(&bytes)
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// With a token, someone without it cannot fill the connection cap with slow bodies sent
/// where no token is asked (a page path, as a write or as a read): such a request is answered
/// before its body is read (the second review shut the operator out with 64 `POST /`).
#[test]
fn with_a_token_slow_bodies_from_someone_without_it_do_not_shut_the_operator_out() {
    let token = "0123456789abcdef0123";
    let server = RedisServer::start();
    let board = dashboard(&server.url(), "127.0.0.1:0", &[], Some(token));
    let addr = authority(&board);
    assert_eq!(operator(&addr, token), Some(200), "answered before");
    for method in ["POST", "GET"] {
        let mut slow: Vec<TcpStream> = (0..CAP)
            .flat_map(|_| {
                let mut s = TcpStream::connect(&addr).ok()?;
                let head = format!(
                    "{method} / HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 100000\r\n\r\nx"
                );
                s.write_all(head.as_bytes()).ok()?;
                Some(s)
            })
            .collect();
        std::thread::sleep(Duration::from_millis(1500));
        for s in &mut slow {
            let _ = s.write_all(b"x");
        }
        let answers: Vec<Option<u16>> = (0..5)
            .map(|_| {
                std::thread::sleep(Duration::from_millis(200));
                operator(&addr, token)
            })
            .collect();
        drop(slow);
        assert!(
            answers.iter().all(|a| *a == Some(200)),
            "the operator during a flood of {CAP} slow `{method} /` bodies: {answers:?} (None: closed unanswered)"
        );
    }
}
