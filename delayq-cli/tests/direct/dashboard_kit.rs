//! What the dashboard's tests of issue 50 share: a dashboard process, one HTTP request written
//! byte for byte (so `Host`, `Origin` and the rest are exactly what a browser or a proxy
//! sends) with the reply's headers, and dead letters made without a listener.

use std::io::{Read, Write};
use std::time::Duration;

use delayq_core::protocol::{queue, NackOutcome};
use delayq_dev::Service;
use delayq_runtime::{Producer, SendOptions};
use serde_json::{json, Value};

/// `delayq dashboard` on a free loopback port (`listen` to choose another), with `extra`
/// arguments and, when given, the token in `DELAYQ_DASHBOARD_TOKEN`.
pub fn dashboard(url: &str, listen: &str, extra: &[&str], token: Option<&str>) -> Service {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_delayq"));
    cmd.args(["--redis-url", url, "dashboard", "--listen", listen])
        .args(extra)
        .env_remove("DELAYQ_NAMESPACE")
        .env_remove("DELAYQ_DASHBOARD_TOKEN");
    if let Some(t) = token {
        cmd.env("DELAYQ_DASHBOARD_TOKEN", t);
    }
    Service::start(cmd)
}

/// `host:port` of a dashboard (its URL without `http://`).
pub fn authority(board: &Service) -> String {
    board.url().trim_start_matches("http://").to_string()
}

/// One reply: its status, headers (names lower-cased) and body.
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

/// Shows the status, the headers and the body's first 300 characters (not a whole page).
impl std::fmt::Debug for Reply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let body: String = self.body.chars().take(300).collect();
        write!(f, "{} {:?} {body:?}", self.status, self.headers)
    }
}

impl Reply {
    /// Every value of header `name`.
    pub fn all(&self, name: &str) -> Vec<&str> {
        self.headers
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
            .collect()
    }

    /// The body as JSON (`null` when it is not).
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }
}

/// Writes one request to `addr` exactly as given (no header added but `Connection: close`
/// and `Content-Length`) and reads the reply to its end.
pub fn raw(addr: &str, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Reply {
    let mut s = std::net::TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        req.push_str(&format!("{name}: {value}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    s.write_all(req.as_bytes()).unwrap();
    let mut bytes = Vec::new();
    s.read_to_end(&mut bytes).expect("read the reply");
    parse_reply(&String::from_utf8_lossy(&bytes))
}

/// A reply as read off the wire (a chunked body is put together).
pub fn parse_reply(reply: &str) -> Reply {
    let (head, body) = reply
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no reply head in {reply:?}"));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status in {reply:?}"));
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let chunked = headers
        .iter()
        .any(|(n, v)| n == "transfer-encoding" && v.contains("chunked"));
    let body = if chunked {
        let mut out = String::new();
        let mut rest = body;
        while let Some((size, after)) = rest.split_once("\r\n") {
            let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
            if n == 0 || after.len() < n {
                break;
            }
            out.push_str(&after[..n]);
            rest = after[n..].trim_start_matches("\r\n");
        }
        out
    } else {
        body.to_string()
    };
    Reply {
        status,
        headers,
        body,
    }
}

/// Dead letters with these ids on `topic` (sent with one attempt, claimed and failed).
pub async fn dead_letters(p: &Producer, topic: &str, ids: &[&str]) {
    for (i, id) in ids.iter().enumerate() {
        let o = SendOptions::new().id(*id).max_attempts(1);
        p.send_with(topic, &json!({"n": i}), o).await.unwrap();
    }
    let q = queue(p, topic).unwrap();
    let claimed = q
        .claim_due(ids.len(), Duration::from_secs(30))
        .await
        .unwrap()
        .claimed;
    assert_eq!(claimed.len(), ids.len(), "every one claimed");
    for c in claimed {
        let out = q.nack(&c.id, c.token(), Duration::ZERO, "boom", 16, None);
        assert_eq!(out.await.unwrap(), NackOutcome::Dead);
    }
}
