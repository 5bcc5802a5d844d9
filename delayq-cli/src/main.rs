//! `delayq`: see what is queued, stuck or dead in a delayq namespace, act on it, or watch it
//! live in a browser (`delayq dashboard`). Tables for people, `--json` for scripts; exit code
//! 0 ok, 1 error, 2 usage.

mod commands;
mod dashboard;
mod report;

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use clap::{ArgGroup, Args, Parser, Subcommand};

/// Operate delayq: topics, messages, dead letters, streams and waiting rooms on Redis.
#[derive(Debug, Parser)]
#[command(name = "delayq", version, about, propagate_version = true)]
struct Cli {
    /// Redis: one URL, a comma-separated list of cluster seed nodes, or a
    /// redis+sentinel:// URL.
    #[arg(
        long,
        global = true,
        env = "DELAYQ_REDIS_URL",
        default_value = "redis://127.0.0.1:6379"
    )]
    redis_url: String,

    /// The key namespace the services use.
    #[arg(
        long,
        global = true,
        env = "DELAYQ_NAMESPACE",
        default_value = "delayq"
    )]
    namespace: String,

    /// Print JSON instead of a table (errors too, as {"error": ...}).
    #[arg(long, global = true)]
    json: bool,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Every topic with its delayed, in-flight and dead counts.
    Topics,
    /// Per topic: counts, next due, oldest claim, and outcomes over the last minute.
    Stats {
        /// One topic (default: all).
        topic: Option<String>,
    },
    /// The next messages due on a topic, without claiming them.
    Peek {
        topic: String,
        /// How many to show.
        #[arg(long, default_value_t = 20)]
        limit: usize,
    },
    /// Sends a message: `delayq send order.timeout '{"order_id":7}' --delay 30s`.
    Send(SendArgs),
    /// Cancels a pending message (exit 1 unless it was removed).
    Cancel { topic: String, id: String },
    /// Dead letters: list, show, replay or purge.
    #[command(subcommand)]
    Dead(DeadCommand),
    /// Every stream with its length, dead letters and consumer groups.
    Streams,
    /// Every waiting room with how many wait and how many are inside.
    Rooms,
    /// A live web page with all of the above (read-only unless --allow-writes).
    Dashboard {
        /// Where to serve it. Anything but loopback exposes your queues to that network.
        #[arg(long, default_value = "127.0.0.1:7878")]
        listen: SocketAddr,
        /// Show and allow the replay and purge buttons of dead letters.
        #[arg(long)]
        allow_writes: bool,
        /// Another name it may be reached by (a reverse proxy's host name), besides the listen
        /// address and `localhost`; requests naming any other host are refused, so that a web
        /// page whose name was re-pointed at this machine (DNS rebinding) cannot read it.
        #[arg(long = "allow-host", value_name = "NAME")]
        allow_hosts: Vec<String>,
        /// A secret every API call must carry (`Authorization: Bearer …`); the page asks for it
        /// once. Anyone who can reach the port without it sees nothing.
        #[arg(long, env = "DELAYQ_DASHBOARD_TOKEN", hide_env_values = true)]
        token: Option<String>,
    },
}

#[derive(Debug, Args)]
struct SendArgs {
    topic: String,
    /// The payload, as JSON.
    #[arg(value_name = "JSON")]
    payload: String,
    /// When it is due, from now: 500ms, 5s, 10m, 2h, 1d.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "0s")]
    delay: Duration,
    /// Your own id: sending it again while it is pending does nothing (see --replace).
    #[arg(long)]
    id: Option<String>,
    /// Replace the pending message with this --id instead of keeping it.
    #[arg(long, requires = "id")]
    replace: bool,
    /// Handler runs allowed in all (default: the listener's).
    #[arg(long)]
    max_attempts: Option<u32>,
}

#[derive(Debug, Subcommand)]
enum DeadCommand {
    /// Dead letters of a topic, oldest first.
    List {
        topic: String,
        /// How many to show.
        #[arg(long, default_value_t = 50)]
        limit: usize,
    },
    /// One dead letter with its full payload and error.
    Show { topic: String, id: String },
    /// Moves dead letters back to due-now with fresh attempts: one by id, or --all.
    Replay(DeadTarget),
    /// Deletes dead letters for good: one by id, or --all.
    Purge(DeadTarget),
}

#[derive(Debug, Args)]
#[command(group(ArgGroup::new("which").required(true).args(["id", "all"])))]
struct DeadTarget {
    /// The topic.
    topic: String,
    /// The dead letter's id.
    id: Option<String>,
    /// Every dead letter of the topic.
    #[arg(long)]
    all: bool,
}

/// Why a command failed, and so its exit code.
#[derive(Debug)]
pub(crate) enum Failure {
    /// The input is wrong (exit 2).
    Usage(String),
    /// It did not work (exit 1).
    Failed(String),
    /// What it names is not there (exit 1; 404 on the dashboard).
    NotFound(String),
}

impl From<delayq_core::Error> for Failure {
    fn from(e: delayq_core::Error) -> Self {
        use delayq_core::Error as E;
        match e {
            E::InvalidTopic { .. }
            | E::InvalidName { .. }
            | E::InvalidNamespace { .. }
            | E::InvalidId { .. }
            | E::InvalidOption { .. }
            | E::InvalidUrl { .. }
            | E::PayloadTooLarge { .. }
            | E::DueTooFar { .. } => Failure::Usage(e.to_string()),
            other => Failure::Failed(other.to_string()),
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let json = cli.json;
    match runtime.block_on(commands::run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            let (code, text) = match failure {
                Failure::Usage(text) => (2, text),
                Failure::Failed(text) | Failure::NotFound(text) => (1, text),
            };
            if json {
                println!("{}", serde_json::json!({ "error": text }));
            }
            eprintln!("error: {}", report::printable_lines(&text));
            ExitCode::from(code)
        }
    }
}
