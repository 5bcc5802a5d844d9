//! A real consumer process for tests that kill, signal or freeze consumers: the
//! `delayq-test-consumer` binary (`src/bin/test_consumer.rs`), and the ledger it writes, one
//! line per handled message.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};

/// One handled message, as a consumer process records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LedgerLine {
    /// The message's payload (the tests send integers).
    pub payload: u64,
    /// Its attempt number.
    pub attempt: u32,
    /// The process that handled it.
    pub pid: u32,
    /// When its handler started, µs since the epoch by the (shared) machine clock.
    pub at_us: u64,
}

/// Now, in µs since the epoch (a ledger line's `at_us`).
pub fn epoch_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

impl LedgerLine {
    /// The line as written: `<payload> <attempt> <pid> <at_us>\n`.
    pub fn format(&self) -> String {
        format!(
            "{} {} {} {}\n",
            self.payload, self.attempt, self.pid, self.at_us
        )
    }

    /// Parses one line; `None` for a torn or foreign line.
    pub fn parse(line: &str) -> Option<LedgerLine> {
        let mut f = line.split(' ');
        let line = LedgerLine {
            payload: f.next()?.parse().ok()?,
            attempt: f.next()?.parse().ok()?,
            pid: f.next()?.parse().ok()?,
            at_us: f.next()?.parse().ok()?,
        };
        f.next().is_none().then_some(line)
    }
}

/// Every complete line of a ledger (none when it does not exist yet). A consumer writes a
/// line in one `write`, but a read can overlap a write in progress, so a last line without
/// its newline is not read yet; a torn line before it panics.
pub fn read_ledger(path: &Path) -> Vec<LedgerLine> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let complete = text.rfind('\n').map_or("", |end| &text[..end]);
    complete
        .lines()
        .map(|l| LedgerLine::parse(l).unwrap_or_else(|| panic!("torn ledger line {l:?}")))
        .collect()
}

/// What a consumer process runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// `delayq-test-consumer`, `delayq_runtime::start()`: the delay listeners `proc.work`
    /// and `proc.slow`.
    Delay,
    /// `delayq-test-streams`: the stream listener of `proc.stream`, group `g` (min_idle 2 s,
    /// concurrency 100).
    Stream,
    /// `delayq-test-streams`: the leader task `proc.leader` (every 50 ms, ttl 1 s), writing
    /// [`LeaderTick`]s.
    Leader,
    /// `delayq-test-streams`: ticks the waiting room `proc.room` ([`PROC_ROOM`]).
    Room,
    /// `delayq-test-streams`: the `#[scheduled]` fn `proc.tick.<policy>` (every 1 s,
    /// ack_timeout 2 s, the catch-up policy of its name), writing [`crate::ScheduleTick`]s.
    Schedule(delayq_core::CatchUp),
}

/// The configuration of the room `proc.room` that `Role::Room` processes tick.
pub const PROC_ROOM: delayq_core::RoomConfig = delayq_core::RoomConfig::fixed(5, 100);

impl Role {
    /// Its name in `DELAYQ_TEST_ROLE`.
    pub fn name(self) -> &'static str {
        match self {
            Role::Delay => "delay",
            Role::Stream => "stream",
            Role::Leader => "leader",
            Role::Room => "room",
            Role::Schedule(delayq_core::CatchUp::Last) => "schedule-last",
            Role::Schedule(delayq_core::CatchUp::None) => "schedule-none",
            Role::Schedule(delayq_core::CatchUp::All) => "schedule-all",
        }
    }
}

/// One run of the leader task, as a process records it: `<token> <start_us> <end_us> <pid>`,
/// times in microseconds since the epoch by the (shared) machine clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaderTick {
    /// The leadership's fencing token.
    pub token: u64,
    /// When the run started.
    pub start_us: u64,
    /// When it ended.
    pub end_us: u64,
    /// The process.
    pub pid: u32,
}

impl LeaderTick {
    /// The line as written.
    pub fn format(&self) -> String {
        format!(
            "{} {} {} {}\n",
            self.token, self.start_us, self.end_us, self.pid
        )
    }

    /// Every tick of a ledger; panics on a torn line.
    pub fn read_all(path: &Path) -> Vec<LeaderTick> {
        std::fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .map(|l| {
                let f: Vec<u64> = l.split(' ').filter_map(|x| x.parse().ok()).collect();
                match f[..] {
                    [token, start_us, end_us, pid] => LeaderTick {
                        token,
                        start_us,
                        end_us,
                        pid: pid as u32,
                    },
                    _ => panic!("torn leader ledger line {l:?}"),
                }
            })
            .collect()
    }
}

/// The test consumer binary: next to the test binary's `deps/` folder, where cargo builds
/// the package's binaries for its integration tests.
fn binary(role: Role) -> PathBuf {
    let name = match role {
        Role::Delay => {
            if let Some(path) = std::env::var_os("DELAYQ_TEST_CONSUMER_BIN") {
                return path.into();
            }
            "delayq-test-consumer"
        }
        Role::Stream | Role::Leader | Role::Room | Role::Schedule(_) => "delayq-test-streams",
    };
    let exe = std::env::current_exe().expect("the test binary's path");
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target directory");
    dir.join(format!("{name}{}", std::env::consts::EXE_SUFFIX))
}

/// A running `delayq-test-consumer`. Its listeners: `proc.work` (ack_timeout 5 s) and
/// `proc.slow` (ack_timeout 1 s); each handler sleeps `handler_ms`, then appends a
/// [`LedgerLine`]. Dropping it kills the process by its pid.
#[derive(Debug)]
pub struct ConsumerProcess {
    child: Option<Child>,
    log: Option<PathBuf>,
}

impl ConsumerProcess {
    /// Starts one against `redis_url`, recording in `ledger`; handlers take `handler_ms`.
    /// It logs errors only, to the test's stderr.
    pub fn start(redis_url: &str, ledger: &Path, handler_ms: u64) -> ConsumerProcess {
        Self::spawn(redis_url, ledger, handler_ms, None, Role::Delay, &[])
    }

    /// One with extra environment variables (`DELAYQ_LISTENER_…` options), logging at WARN
    /// into `log`.
    pub fn start_with_env(
        redis_url: &str,
        ledger: &Path,
        log: &Path,
        env: &[(&str, &str)],
    ) -> ConsumerProcess {
        Self::spawn(redis_url, ledger, 0, Some(log), Role::Delay, env)
    }

    /// One that runs only `role`'s listener (see the binary's docs), logging at WARN into
    /// `log`.
    pub fn start_as(
        role: Role,
        redis_url: &str,
        ledger: &Path,
        handler_ms: u64,
        log: &Path,
    ) -> ConsumerProcess {
        Self::spawn(redis_url, ledger, handler_ms, Some(log), role, &[])
    }

    /// The same, logging at WARN into `log` (read it with [`log_text`](Self::log_text)).
    pub fn start_logging(
        redis_url: &str,
        ledger: &Path,
        handler_ms: u64,
        log: &Path,
    ) -> ConsumerProcess {
        Self::spawn(redis_url, ledger, handler_ms, Some(log), Role::Delay, &[])
    }

    fn spawn(
        redis_url: &str,
        ledger: &Path,
        handler_ms: u64,
        log: Option<&Path>,
        role: Role,
        env: &[(&str, &str)],
    ) -> Self {
        let mut cmd = Command::new(binary(role));
        cmd.envs(env.iter().copied());
        cmd.env("DELAYQ_REDIS_URL", redis_url)
            .env("DELAYQ_TEST_ROLE", role.name())
            .env("DELAYQ_TEST_LEDGER", ledger)
            .env("DELAYQ_TEST_HANDLER_MS", handler_ms.to_string())
            .env("RUST_LOG", if log.is_some() { "warn" } else { "error" })
            .stdin(Stdio::null());
        if let Some(log) = log {
            let file = std::fs::File::create(log).expect("create the consumer's log file");
            cmd.stderr(file);
        }
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("start the test consumer {}: {e}", binary(role).display()));
        ConsumerProcess {
            child: Some(child),
            log: log.map(Path::to_path_buf),
        }
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// Sends `sig` to it (while it has not been reaped).
    pub fn signal(&self, sig: libc::c_int) {
        if let Some(child) = &self.child {
            crate::signal_pid(child.id(), sig);
        }
    }

    /// Freezes it with SIGSTOP.
    pub fn freeze(&self) {
        self.signal(libc::SIGSTOP);
    }

    /// Resumes it with SIGCONT.
    pub fn thaw(&self) {
        self.signal(libc::SIGCONT);
    }

    /// Kills it with SIGKILL, as a crash would, and reaps it.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Sends `sig` (thawing it first) and waits for it to exit.
    pub fn stop_with(&mut self, sig: libc::c_int) -> Option<ExitStatus> {
        self.thaw();
        self.signal(sig);
        self.child
            .take()
            .map(|mut c| c.wait().expect("wait for the consumer"))
    }

    /// Waits up to `limit` for it to exit on its own (say, after a signal); `None` when it is
    /// still running then.
    pub fn wait_exit(&mut self, limit: std::time::Duration) -> Option<ExitStatus> {
        let deadline = std::time::Instant::now() + limit;
        let child = self.child.as_mut()?;
        loop {
            if let Some(status) = child.try_wait().expect("poll the consumer") {
                self.child = None;
                return Some(status);
            }
            if std::time::Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// Stops it gracefully with SIGTERM and waits for it to exit.
    pub fn stop(mut self) -> Option<ExitStatus> {
        self.stop_with(libc::SIGTERM)
    }

    /// What it logged so far (with [`start_logging`](Self::start_logging)).
    pub fn log_text(&self) -> String {
        self.log
            .as_ref()
            .and_then(|p| std::fs::read_to_string(p).ok())
            .unwrap_or_default()
    }
}

impl Drop for ConsumerProcess {
    fn drop(&mut self) {
        self.thaw();
        self.kill9();
    }
}

/// For the consumer binaries: how long a handler sleeps (`DELAYQ_TEST_HANDLER_MS`, default 0).
pub fn handler_delay() -> std::time::Duration {
    let ms = std::env::var("DELAYQ_TEST_HANDLER_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    std::time::Duration::from_millis(ms)
}

/// For the consumer binaries: appends `line` to the ledger `DELAYQ_TEST_LEDGER` in one write
/// call, so that a process killed mid-way never leaves half a line.
pub fn append_to_ledger(line: &str) -> Result<(), String> {
    use std::io::Write;
    let path = std::env::var("DELAYQ_TEST_LEDGER").map_err(|_| "DELAYQ_TEST_LEDGER is not set")?;
    let mut ledger = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .map_err(|e| format!("open {path}: {e}"))?;
    ledger.write_all(line.as_bytes()).map_err(|e| e.to_string())
}

/// For the consumer binaries: logs to stderr, filtered by `RUST_LOG` (default info).
pub fn init_process_tracing() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
}
