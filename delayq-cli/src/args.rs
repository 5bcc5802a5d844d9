//! The command line: every command and option (clap), with the help each prints.

use std::net::SocketAddr;
use std::time::Duration;

use clap::{ArgGroup, Args, Parser, Subcommand};

/// Operate delayq: topics, messages, dead letters, streams and waiting rooms on Redis.
#[derive(Debug, Parser)]
#[command(name = "delayq", version, about, propagate_version = true)]
pub(crate) struct Cli {
    /// Redis: one URL, a comma-separated list of cluster seed nodes, or a
    /// redis+sentinel:// URL. Else DELAYQ_REDIS_URL, else redis_url in delayq.toml
    /// (DELAYQ_CONFIG, else ./delayq.toml), else redis://127.0.0.1:6379 — as the runtime.
    #[arg(long, global = true)]
    pub(crate) redis_url: Option<String>,

    /// The key namespace the services use. Else DELAYQ_NAMESPACE, else namespace in
    /// delayq.toml, else delayq — as the runtime.
    #[arg(long, global = true)]
    pub(crate) namespace: Option<String>,

    /// Print JSON instead of a table (errors too, as {"error": ...}).
    #[arg(long, global = true)]
    pub(crate) json: bool,

    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Every topic with its delayed, in-flight and dead counts.
    Topics,
    /// Per topic: counts, next due, oldest claim, and outcomes over the last minute.
    Stats {
        /// One topic (default: all).
        topic: Option<String>,
        /// The history instead: handled, retried, dead and timed out per minute, lateness
        /// p50/p99 and the backlog, as sparklines over this long (a point a minute up to 24h,
        /// an hour up to 720h): `--since 1h`.
        #[arg(long, value_parser = since)]
        since: Option<Duration>,
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
    /// Where one message is now: delayed (its due time), in flight (its claim's deadline and
    /// attempt), dead (why), finished within a dedup window, or unknown (exit 1); with its
    /// attempts, last error and payload. One bounded lookup, however large the topic.
    Find { topic: String, id: String },
    /// What a message's handler returned (kept for the listener's `result_ttl`), or how it
    /// ended: done, dead (why), cancelled, pending; unknown exits 1. `--wait 30s` waits for
    /// its end first, at most that long.
    Result {
        topic: String,
        id: String,
        #[arg(long, value_parser = delay)]
        wait: Option<Duration>,
    },
    /// Cancels a pending message (exit 1 unless it was removed).
    Cancel { topic: String, id: String },
    /// Pauses a topic: no process claims its messages until `delayq resume`; sends keep
    /// arriving and running handlers finish. The state is kept in Redis.
    Pause { topic: String },
    /// Resumes a paused topic: every process claims what came due meanwhile at once.
    Resume { topic: String },
    /// Dead letters: list, show, replay or purge.
    #[command(subcommand)]
    Dead(DeadCommand),
    /// Flows, newest first, with their state: `--state failed` for the failed ones.
    Flows {
        /// Only the flows in this state: running, done, failed or cancelled.
        #[arg(long)]
        state: Option<String>,
        /// How many of the newest to look at.
        #[arg(long, default_value_t = 100)]
        limit: usize,
    },
    /// One flow: `show ID` (its steps as a tree, each with its state and run), `retry ID`
    /// (its failed and cancelled steps and what is downstream run again), `cancel ID`.
    #[command(subcommand)]
    Flow(FlowCommand),
    /// Every stream with its length, dead letters and consumer groups.
    Streams,
    /// Every waiting room with how many wait and how many are inside.
    Rooms,
    /// Every schedule with its next and last tick and the last tick's outcome; `remove`,
    /// `suspend`, `resume` or `run` one by name.
    Schedules {
        #[command(subcommand)]
        action: Option<ScheduleCommand>,
    },
    /// The runtime's configuration file, checked offline: `delayq config check [FILE]`.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// A live web page with all of the above (read-only unless --allow-writes).
    Dashboard {
        /// Where to serve it. Anything but loopback exposes your queues to that network.
        #[arg(long, default_value = "127.0.0.1:7878")]
        listen: SocketAddr,
        /// Show and allow the replay and purge buttons of dead letters.
        #[arg(long)]
        allow_writes: bool,
        /// Another name it may be reached by (a reverse proxy's host name, NAME or NAME:PORT),
        /// besides the listen address and `localhost`; requests naming any other host are
        /// refused, so that a web page whose name was re-pointed at this machine (DNS
        /// rebinding) cannot read it. Writes from the page on that name, over http:// or
        /// https://, are accepted.
        #[arg(long = "allow-host", value_name = "NAME")]
        allow_hosts: Vec<String>,
        /// A secret every API call must carry (`Authorization: Bearer …`); the page asks for it
        /// once. Anyone who can reach the port without it sees nothing.
        #[arg(long, env = "DELAYQ_DASHBOARD_TOKEN", hide_env_values = true)]
        token: Option<String>,
    },
}

#[derive(Debug, Args)]
pub(crate) struct SendArgs {
    pub(crate) topic: String,
    /// The payload, as JSON.
    #[arg(value_name = "JSON")]
    pub(crate) payload: String,
    /// When it is due, from now: 500ms, 5s, 10m, 2h, 1h30m (durations as delayq.toml writes them).
    #[arg(long, value_parser = delay, default_value = "0s")]
    pub(crate) delay: Duration,
    /// Your own id: sending it again while it is pending does nothing (see --replace).
    #[arg(long)]
    pub(crate) id: Option<String>,
    /// Replace the pending message with this --id instead of keeping it.
    #[arg(long, requires = "id")]
    pub(crate) replace: bool,
    /// Handler runs allowed in all (default: the listener's).
    #[arg(long)]
    pub(crate) max_attempts: Option<u32>,
}

#[derive(Debug, Subcommand)]
pub(crate) enum ConfigCommand {
    /// Checks a delayq.toml: its syntax, option names and value types, without Redis or the
    /// service's binary (so not whether each topic has a listener). Exit 0 when it is sound,
    /// 2 listing every problem with its line, 1 when it cannot be read.
    Check {
        /// The file (default: DELAYQ_CONFIG, else ./delayq.toml).
        file: Option<std::path::PathBuf>,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum ScheduleCommand {
    /// Suspends a schedule: no tick is produced until `resume` (one already written, at most
    /// about a second ahead, still runs). Kept in Redis: every process, and a runtime that
    /// starts with a `#[scheduled]` fn, keeps it suspended.
    Suspend { name: String },
    /// Resumes a suspended schedule from its first tick after now (the ticks it missed while
    /// suspended are not caught up).
    Resume { name: String },
    /// Runs a schedule once now, besides its ticks: a tick due now, with its payload.
    Run { name: String },
    /// Removes a schedule (exit 1 when there is none). A tick already written, at most about a
    /// second ahead of its time, still runs. A `#[scheduled]` fn's schedule is written again when
    /// a runtime that has it starts, so it is refused (exit 2) without --force.
    Remove {
        name: String,
        /// Remove a `#[scheduled]` fn's schedule too (it comes back when a runtime that has the
        /// fn starts).
        #[arg(long)]
        force: bool,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum FlowCommand {
    /// The flow's steps as a tree, each with its topic, state and run.
    Show { id: String },
    /// Runs its failed and cancelled steps, and every step downstream of them, again.
    Retry { id: String },
    /// Cancels it: steps not sent never run, those pending in their topics are removed.
    Cancel { id: String },
}

#[derive(Debug, Subcommand)]
pub(crate) enum DeadCommand {
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
    // clap writes a required group before the positionals: the usage is spelled out.
    #[command(override_usage = "delayq dead replay [OPTIONS] <TOPIC> <ID|--all>")]
    Replay(DeadTarget),
    /// Deletes dead letters for good: one by id, or --all.
    #[command(override_usage = "delayq dead purge [OPTIONS] <TOPIC> <ID|--all>")]
    Purge(DeadTarget),
}

#[derive(Debug, Args)]
#[command(group(ArgGroup::new("which").required(true).args(["id", "all"])))]
pub(crate) struct DeadTarget {
    /// The topic.
    pub(crate) topic: String,
    /// The dead letter's id.
    pub(crate) id: Option<String>,
    /// Every dead letter of the topic.
    #[arg(long)]
    pub(crate) all: bool,
}

/// `--delay`: a duration as every other part of delayq reads it (`delayq-spec`'s rule), zero
/// allowed.
pub(crate) fn delay(text: &str) -> Result<Duration, String> {
    if text.trim() == "0" {
        return Ok(Duration::ZERO); // zero needs no unit
    }
    delayq_spec::duration::parse_ms(text)
        .map(Duration::from_millis)
        .ok_or_else(|| {
            format!(
                "expected a duration: {} (a day is 24h)",
                delayq_spec::duration::FORMAT
            )
        })
}

/// `--since`: a duration from a minute to 30 days (720h).
pub(crate) fn since(text: &str) -> Result<Duration, String> {
    let d = delay(text)?;
    if d < Duration::from_secs(60) || d > delayq_core::HISTORY_HOURS {
        return Err("the history goes back from 1m to 720h (30 days)".into());
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delay_reads_durations_as_delayq_toml_does() {
        assert_eq!(delay("0"), Ok(Duration::ZERO));
        assert_eq!(delay("0s"), Ok(Duration::ZERO));
        assert_eq!(delay("1h30m"), Ok(Duration::from_secs(5_400)));
        assert_eq!(delay("30 s"), Ok(Duration::from_secs(30)));
        let err = delay("1d").unwrap_err();
        assert!(err.contains("24h"), "{err}");
        assert!(delay("soon").is_err() && delay("5").is_err());
    }
}
