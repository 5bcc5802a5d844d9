//! A TCP proxy for tests of silent network failures: it forwards loopback connections to a
//! server and can black-hole the ones it holds, so they stay open and swallow every byte in
//! both directions without a FIN or RST, as a NAT or load balancer does when it forgets an
//! idle flow. Connections made after that are forwarded normally. It can also hold every
//! reply back for a while (`delay_replies`), as a congested or paused path does: requests
//! reach the server at once, their replies arrive late, in order.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

/// One proxied connection: both sockets, and whether it is black-holed.
struct Flow {
    client: TcpStream,
    server: TcpStream,
    dark: Arc<AtomicBool>,
}

/// A forwarding proxy on a free loopback port. Dropping it closes its listener and every
/// connection it holds.
pub struct BlackholeProxy {
    port: u16,
    flows: Arc<Mutex<Vec<Flow>>>,
    closed: Arc<AtomicBool>,
    /// How long each reply (server to client) is held, in ms.
    reply_delay_ms: Arc<AtomicU64>,
    /// New connections are accepted and black-holed from the start.
    all_dark: Arc<AtomicBool>,
}

impl std::fmt::Debug for BlackholeProxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlackholeProxy")
            .field("port", &self.port)
            .finish_non_exhaustive()
    }
}

impl BlackholeProxy {
    /// Forwards a free loopback port to `target_port` on 127.0.0.1.
    pub fn start(target_port: u16) -> BlackholeProxy {
        let listener =
            TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind the proxy's loopback port");
        let port = listener.local_addr().expect("proxy address").port();
        let flows: Arc<Mutex<Vec<Flow>>> = Arc::default();
        let closed = Arc::new(AtomicBool::new(false));
        let reply_delay_ms = Arc::new(AtomicU64::new(0));
        let all_dark = Arc::new(AtomicBool::new(false));
        let target = SocketAddr::from((Ipv4Addr::LOCALHOST, target_port));
        {
            let (flows, closed, delay) = (flows.clone(), closed.clone(), reply_delay_ms.clone());
            let dark = all_dark.clone();
            std::thread::spawn(move || accept(listener, target, flows, closed, delay, dark));
        }
        BlackholeProxy {
            port,
            flows,
            closed,
            reply_delay_ms,
            all_dark,
        }
    }

    /// A whole outage without a single RST: every connection open now is black-holed, and
    /// so is every new one (accepted, then silent), until [`restore`](Self::restore).
    pub fn blackhole_all(&self) {
        self.all_dark.store(true, Ordering::SeqCst);
        self.blackhole();
    }

    /// Ends [`blackhole_all`](Self::blackhole_all) for new connections (the dark ones stay
    /// dark).
    pub fn restore(&self) {
        self.all_dark.store(false, Ordering::SeqCst);
    }

    /// From now on, holds every byte the server sends back for `delay` before passing it on
    /// (on every connection, open or new); `Duration::ZERO` forwards at once again. Bytes
    /// already held keep the delay they were read with.
    pub fn delay_replies(&self, delay: Duration) {
        let ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX);
        self.reply_delay_ms.store(ms, Ordering::SeqCst);
    }

    /// `redis://127.0.0.1:<proxy port>`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Stops forwarding on every connection open now, without closing any; new connections
    /// are forwarded as before.
    pub fn blackhole(&self) {
        for flow in self.flows.lock().unwrap().iter() {
            flow.dark.store(true, Ordering::SeqCst);
        }
    }

    /// How many connections it has accepted so far.
    pub fn connections(&self) -> usize {
        self.flows.lock().unwrap().len()
    }
}

fn accept(
    listener: TcpListener,
    target: SocketAddr,
    flows: Arc<Mutex<Vec<Flow>>>,
    closed: Arc<AtomicBool>,
    reply_delay_ms: Arc<AtomicU64>,
    all_dark: Arc<AtomicBool>,
) {
    let no_delay = Arc::new(AtomicU64::new(0));
    for client in listener.incoming() {
        if closed.load(Ordering::SeqCst) {
            return;
        }
        let Ok(client) = client else { continue };
        let Ok(server) = TcpStream::connect_timeout(&target, Duration::from_secs(2)) else {
            let _ = client.shutdown(Shutdown::Both);
            continue;
        };
        let dark = Arc::new(AtomicBool::new(all_dark.load(Ordering::SeqCst)));
        let pump = |from: &TcpStream, to: &TcpStream, delay: &Arc<AtomicU64>| {
            let (from, to, dark) = (from.try_clone(), to.try_clone(), dark.clone());
            if let (Ok(from), Ok(to)) = (from, to) {
                let delay = delay.clone();
                std::thread::spawn(move || forward(from, to, dark, delay));
            }
        };
        pump(&client, &server, &no_delay);
        pump(&server, &client, &reply_delay_ms);
        flows.lock().unwrap().push(Flow {
            client,
            server,
            dark,
        });
    }
}

/// Copies `from` to `to` until either side closes, each chunk `delay_ms` after it was read
/// (a writer thread keeps the order); once `dark`, reads and discards.
fn forward(mut from: TcpStream, to: TcpStream, dark: Arc<AtomicBool>, delay_ms: Arc<AtomicU64>) {
    let (held, release) = mpsc::channel::<(Instant, Vec<u8>)>();
    std::thread::spawn(move || write_when_due(release, to));
    let mut buf = [0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if dark.load(Ordering::SeqCst) {
            continue;
        }
        let due = Instant::now() + Duration::from_millis(delay_ms.load(Ordering::SeqCst));
        if held.send((due, buf[..n].to_vec())).is_err() {
            break;
        }
    }
}

/// Writes each chunk to `to` once its time has come; shuts `to`'s write side when the reader
/// is gone (after what it held) or `to` fails.
fn write_when_due(chunks: mpsc::Receiver<(Instant, Vec<u8>)>, mut to: TcpStream) {
    for (due, chunk) in chunks {
        std::thread::sleep(due.saturating_duration_since(Instant::now()));
        if to.write_all(&chunk).is_err() {
            break;
        }
    }
    let _ = to.shutdown(Shutdown::Write);
}

impl Drop for BlackholeProxy {
    fn drop(&mut self) {
        self.closed.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees `closed`.
        let _ = TcpStream::connect((Ipv4Addr::LOCALHOST, self.port));
        for flow in self.flows.lock().unwrap().drain(..) {
            let _ = flow.client.shutdown(Shutdown::Both);
            let _ = flow.server.shutdown(Shutdown::Both);
        }
    }
}
