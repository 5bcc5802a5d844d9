//! The dashboard behind a reverse proxy that terminates HTTPS (issue 50, item 4). The proxy
//! here forwards plain HTTP as one that decrypted it would: what the browser sent on
//! `https://dash.example.com` (its `Host`, `Origin: https://dash.example.com`, its
//! `Sec-Fetch-Site` when it sends one), with `Host` kept, rewritten to the upstream address
//! (nginx's default) or stripped of its port (`$host`), and `X-Forwarded-*` added. Writes
//! from the dashboard's own page then work; cross-site ones, and odd headers, stay refused.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};

use delayq_dev::{producer, RedisServer};
use serde_json::Value;

use crate::dashboard_kit::{authority, dashboard, raw, Reply};

/// What the proxy does to `Host`.
#[derive(Clone, Copy, Debug)]
enum HostRule {
    /// Passes it on (nginx `proxy_set_header Host $http_host`).
    Keep,
    /// Sets the upstream's address (nginx's default, `$proxy_host`).
    Upstream,
    /// Drops its port (nginx `proxy_set_header Host $host`).
    NoPort,
}

/// A reverse proxy on a free port in front of `upstream`: one thread a connection.
fn proxy(upstream: String, rule: HostRule) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        for client in listener.incoming().map_while(Result::ok) {
            let upstream = upstream.clone();
            std::thread::spawn(move || forward(client, &upstream, rule));
        }
    });
    addr
}

/// Reads the client's request head, rewrites it as `rule` says, and relays both ways.
fn forward(mut client: TcpStream, upstream: &str, rule: HostRule) {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match client.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => return,
        }
    }
    let head = String::from_utf8_lossy(&head).to_string();
    let mut lines = head.trim_end().split("\r\n");
    let mut out = format!("{}\r\n", lines.next().unwrap_or_default());
    for line in lines {
        let (name, value) = line.split_once(':').unwrap_or((line, ""));
        if name.eq_ignore_ascii_case("host") {
            let value = value.trim();
            let host = match rule {
                HostRule::Keep => value.to_string(),
                HostRule::Upstream => upstream.to_string(),
                HostRule::NoPort => value.rsplit_once(':').map_or(value, |(h, _)| h).to_string(),
            };
            out.push_str(&format!("Host: {host}\r\n"));
        } else {
            out.push_str(line);
            out.push_str("\r\n");
        }
    }
    out.push_str("X-Forwarded-Proto: https\r\nX-Forwarded-For: 203.0.113.7\r\n\r\n");
    let Ok(mut server) = TcpStream::connect(upstream) else {
        return;
    };
    if server.write_all(out.as_bytes()).is_err() {
        return;
    }
    let (mut from_client, mut to_server) =
        (client.try_clone().unwrap(), server.try_clone().unwrap());
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut from_client, &mut to_server);
    });
    let _ = std::io::copy(&mut server, &mut client);
    // The upstream closed: so does the client's side (the thread above holds a clone of it).
    let _ = client.shutdown(std::net::Shutdown::Both);
}

const PUBLIC: &str = "dash.example.com";

/// A confirmed `POST /api/topics/dash.proxy/flow/{action}` through `proxy`, with `headers`.
fn flow(proxy: &str, action: &str, headers: &[(&str, &str)]) -> Reply {
    let mut all = vec![("X-Delayq-Confirm", "yes")];
    all.extend_from_slice(headers);
    let path = format!("/api/topics/dash.proxy/flow/{action}");
    raw(proxy, "POST", &path, &all, "")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_from_its_own_page_behind_an_https_proxy_work_and_cross_site_ones_do_not() {
    let server = RedisServer::start();
    let p = producer(&server).await;
    p.send("dash.proxy", &1u8, std::time::Duration::from_secs(600))
        .await
        .unwrap();
    let board = dashboard(
        &server.url(),
        "127.0.0.1:0",
        &["--allow-writes", "--allow-host", PUBLIC],
        None,
    );
    let upstream = authority(&board);
    let public_origin = format!("https://{PUBLIC}");
    // Its own page, as a browser sends it with and without Sec-Fetch-Site (Safari before
    // 16.4 sends none), through each way of passing Host on.
    for rule in [HostRule::Keep, HostRule::Upstream, HostRule::NoPort] {
        let via = proxy(upstream.clone(), rule);
        for fetch_site in [None, Some("same-origin")] {
            let mut headers = vec![("Host", PUBLIC), ("Origin", public_origin.as_str())];
            headers.extend(fetch_site.map(|s| ("Sec-Fetch-Site", s)));
            let paused = flow(&via, "pause", &headers);
            assert_eq!(paused.status, 200, "{rule:?} {fetch_site:?}: {paused:?}");
            assert_eq!(paused.json()["outcome"], "paused", "{paused:?}");
            assert!(p.is_paused("dash.proxy").await.unwrap());
            let resumed = flow(&via, "resume", &headers);
            assert_eq!(resumed.status, 200, "{rule:?} {fetch_site:?}: {resumed:?}");
            assert!(!p.is_paused("dash.proxy").await.unwrap());
        }
    }
    // A proxy on another public port whose Host loses that port ($host): the browser's
    // Sec-Fetch-Site says the page is this site's own.
    let via = proxy(upstream.clone(), HostRule::NoPort);
    let on_8443 = format!("https://{PUBLIC}:8443");
    let host_8443 = format!("{PUBLIC}:8443");
    let headers = [
        ("Host", host_8443.as_str()),
        ("Origin", on_8443.as_str()),
        ("Sec-Fetch-Site", "same-origin"),
    ];
    let paused = flow(&via, "pause", &headers);
    assert_eq!(paused.status, 200, "{paused:?}");
    assert_eq!(flow(&via, "resume", &headers).status, 200);

    // Cross-site, and whatever odd headers a page or a proxy may send: refused, through each
    // proxy and directly.
    let evil = "https://evil.example";
    let refused: Vec<Vec<(&str, &str)>> = vec![
        vec![("Origin", evil)],
        vec![("Origin", evil), ("Sec-Fetch-Site", "cross-site")],
        vec![
            ("Origin", public_origin.as_str()),
            ("Sec-Fetch-Site", "cross-site"),
        ],
        vec![
            ("Origin", public_origin.as_str()),
            ("Sec-Fetch-Site", "same-site"),
        ],
        vec![("Origin", "null")],
        vec![("Origin", "https://dash.example.com.evil.example")],
        vec![("Origin", "https://evil.example@dash.example.com")],
        vec![("Origin", "https://dash.example.com/")],
        vec![("Origin", "ftp://dash.example.com")],
        vec![("Origin", "https://dash.example.com:8443")],
        vec![("Origin", public_origin.as_str()), ("Origin", evil)],
        vec![("Origin", evil), ("Origin", public_origin.as_str())],
        vec![
            ("Sec-Fetch-Site", "same-origin"),
            ("Sec-Fetch-Site", "cross-site"),
        ],
    ];
    let direct_host = upstream.clone();
    for rule in [HostRule::Keep, HostRule::Upstream] {
        let via = proxy(upstream.clone(), rule);
        for odd in &refused {
            let mut headers = vec![("Host", PUBLIC)];
            headers.extend_from_slice(odd);
            let reply = flow(&via, "pause", &headers);
            assert_eq!(reply.status, 403, "{rule:?} {odd:?}: {reply:?}");
            let mut headers = vec![("Host", direct_host.as_str())];
            headers.extend_from_slice(odd);
            let reply = flow(&upstream, "pause", &headers);
            assert_eq!(reply.status, 403, "directly, {odd:?}: {reply:?}");
        }
    }
    // A rebound name whose page says same-origin, and a Host sent twice: not this dashboard.
    let rebound = [
        vec![
            ("Host", "evil.example"),
            ("Origin", "https://evil.example"),
            ("Sec-Fetch-Site", "same-origin"),
        ],
        vec![("Host", direct_host.as_str()), ("Host", "evil.example")],
        vec![("Host", "evil.example"), ("Host", direct_host.as_str())],
    ];
    for headers in &rebound {
        let reply = flow(&upstream, "pause", headers);
        assert!(matches!(reply.status, 400 | 421), "{headers:?}: {reply:?}");
    }
    assert!(
        !p.is_paused("dash.proxy").await.unwrap(),
        "no refused write paused it"
    );
    // The refusal names what a write must come from.
    let reply = flow(
        &upstream,
        "pause",
        &[("Host", &direct_host), ("Origin", evil)],
    );
    let why = reply.json()["error"].as_str().map(String::from);
    assert!(
        why.as_deref()
            .is_some_and(|w| w.contains(PUBLIC) && w.contains("https")),
        "{reply:?}"
    );
    assert_eq!(reply.json().get("outcome"), None::<&Value>);
}

/// On IPv6 loopback, `Host` and `Origin` carry the address in brackets.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_from_its_own_page_on_ipv6_loopback_works() {
    if TcpListener::bind("[::1]:0").is_err() {
        eprintln!("no IPv6 loopback here: nothing to check");
        return;
    }
    let server = RedisServer::start();
    let p = producer(&server).await;
    p.send("dash.proxy", &1u8, std::time::Duration::from_secs(600))
        .await
        .unwrap();
    let board = dashboard(&server.url(), "[::1]:0", &["--allow-writes"], None);
    let own = authority(&board);
    let origin = format!("http://{own}");
    let reply = flow(&own, "pause", &[("Host", &own), ("Origin", &origin)]);
    assert_eq!(reply.status, 200, "{reply:?}");
    let port = own.rsplit(':').next().unwrap();
    let other = format!("http://[::2]:{port}");
    let reply = flow(&own, "resume", &[("Host", &own), ("Origin", &other)]);
    assert_eq!(reply.status, 403, "{reply:?}");
    assert!(p.is_paused("dash.proxy").await.unwrap());
}

// --- From the second review: the Origin rule named hosts as the Host rule does, so another
// port or scheme of this machine, or any IP when listening on all, passed ------------------

/// A confirmed write's status, as from a page of origin `origin` (no `Sec-Fetch-Site`: a
/// browser that sends none, or plain http to a LAN address).
fn write_from(addr: &str, host: &str, origin: &str) -> u16 {
    raw(
        addr,
        "POST",
        "/api/topics/review.t/flow/pause",
        &[
            ("Host", host),
            ("Origin", origin),
            ("X-Delayq-Confirm", "yes"),
        ],
        "",
    )
    .status
}

#[test]
fn a_write_from_another_port_or_scheme_of_this_machine_is_refused() {
    let server = RedisServer::start();
    let board = dashboard(&server.url(), "127.0.0.1:0", &["--allow-writes"], None);
    let addr = authority(&board);
    let wrong: Vec<(&str, u16)> = ["http://127.0.0.1", "http://localhost", "https://localhost"]
        .into_iter()
        .map(|origin| (origin, write_from(&addr, &addr, origin)))
        .filter(|(_, status)| *status != 403)
        .collect();
    assert!(
        wrong.is_empty(),
        "writes from another origin passed: {wrong:?}"
    );
    // The page's own origin still writes (404: the topic has no such flow, past the guard).
    let own = write_from(&addr, &addr, &format!("http://{addr}"));
    assert_ne!(own, 403, "the dashboard's own page");
}

#[test]
fn a_write_from_any_ip_origin_is_refused_when_listening_on_all_addresses() {
    let server = RedisServer::start();
    let board = dashboard(&server.url(), "0.0.0.0:0", &["--allow-writes"], None);
    let port = authority(&board).rsplit_once(':').unwrap().1.to_string();
    let addr = format!("127.0.0.1:{port}");
    let wrong: Vec<(String, u16)> = [
        "http://203.0.113.9".to_string(),
        format!("http://203.0.113.9:{port}"),
        "https://198.51.100.7".to_string(),
    ]
    .into_iter()
    .map(|origin| {
        let status = write_from(&addr, &addr, &origin);
        (origin, status)
    })
    .filter(|(_, status)| *status != 403)
    .collect();
    assert!(
        wrong.is_empty(),
        "writes from a foreign IP origin passed: {wrong:?}"
    );
}
