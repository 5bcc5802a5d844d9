//! One function per command; each prints a table, or JSON with `--json`. The dead-letter
//! commands are in dead.rs, the schedule commands in schedules.rs, `config check` in config.rs.

mod config;
mod dead;
mod flows;
mod outcome;
mod result;
mod schedules;

use std::time::{Duration, SystemTime};

use delayq_core::{Cancelled, Producer, SendOptions, SendOutcome};
use serde_json::{json, Value};

use outcome::{emit, known_topic, message_id, warn_unreadable, Outcome};

use crate::args::{Cli, Command, SendArgs};
use crate::dashboard;
use crate::failure::Failure;
use crate::namespace::{
    all_histories, all_rooms, all_stats, all_streams, connect, namespace_label, resolve, Entry,
};
use crate::report::{self, table, Kind};

pub(crate) async fn run(cli: Cli) -> Outcome {
    // Offline: no Redis.
    if let Command::Config(action) = cli.command {
        return config::run(cli.json, action);
    }
    let connection = resolve(cli.redis_url.as_deref(), cli.namespace.as_deref())?;
    let p = connect(&connection).await?;
    let json = cli.json;
    match cli.command {
        Command::Topics => {
            let stats = all_stats(&p).await?;
            warn_unreadable(&stats, "topics");
            emit(
                json,
                json!(stats
                    .iter()
                    .map(|e| e.json("topic", |s| json!({"topic": s.topic, "delayed": s.delayed, "inflight": s.inflight, "dead": s.dead})))
                    .collect::<Vec<_>>()),
                || {
                    const HEADER: &[&str] = &["TOPIC", "DELAYED", "IN FLIGHT", "DEAD"];
                    let mut t = table(HEADER);
                    for e in &stats {
                        t.add_row(match &e.read {
                            Ok(s) => vec![
                                s.topic.clone(),
                                s.delayed.to_string(),
                                s.inflight.to_string(),
                                s.dead.to_string(),
                            ],
                            Err(why) => report::error_row(&e.name, why, HEADER.len()),
                        });
                    }
                    format!("namespace {}\n{t}", namespace_label(&connection))
                },
            )?;
        }
        Command::Stats {
            topic,
            since: Some(window),
        } => history(&p, json, topic, window).await?,
        Command::Stats { topic, since: None } => {
            let stats = match topic {
                Some(topic) => {
                    known_topic(&p, &topic).await?;
                    let read = Ok(p.topic_stats(&topic).await?);
                    vec![Entry { name: topic, read }]
                }
                None => all_stats(&p).await?,
            };
            warn_unreadable(&stats, "topics");
            emit(
                json,
                json!(stats
                    .iter()
                    .map(|e| e.json("topic", report::stats_json))
                    .collect::<Vec<_>>()),
                || {
                    let mut t = table(report::STATS_HEADER);
                    for e in &stats {
                        t.add_row(match &e.read {
                            Ok(s) => report::stats_row(s),
                            Err(why) => report::error_row(&e.name, why, report::STATS_HEADER.len()),
                        });
                    }
                    t.to_string()
                },
            )?;
        }
        Command::Peek { topic, limit } => {
            known_topic(&p, &topic).await?;
            let messages = p.peek(&topic, 0..limit).await?;
            let now = SystemTime::now();
            emit(
                json,
                json!(messages
                    .iter()
                    .map(report::pending_json)
                    .collect::<Vec<_>>()),
                || {
                    let mut t = table(report::PEEK_HEADER);
                    for m in &messages {
                        t.add_row(report::pending_row(m, now));
                    }
                    t.to_string()
                },
            )?;
        }
        Command::Send(args) => send(&p, json, args).await?,
        Command::Find { topic, id } => {
            known_topic(&p, &topic).await?;
            let id = message_id(&id)?;
            let found = p.find(&topic, &id).await?;
            if found.place == delayq_core::Place::Unknown {
                return Err(report::not_found(&topic, &id));
            }
            emit(json, report::found_json(&topic, &found), || {
                report::found_detail(&topic, &found, SystemTime::now()).to_string()
            })?;
        }
        Command::Result { topic, id, wait } => result::run(&p, json, (topic, id, wait)).await?,
        Command::Flows { state, limit } => flows::list(&p, json, state, limit).await?,
        Command::Flow(command) => flows::run(&p, json, command).await?,
        Command::Cancel { topic, id } => {
            known_topic(&p, &topic).await?;
            let id = message_id(&id)?;
            let outcome = p.cancel(&topic, &id).await?;
            let word = match outcome {
                Cancelled::Removed => "removed",
                Cancelled::NotFound => "not_found",
                Cancelled::InFlight => "in_flight",
            };
            match outcome {
                Cancelled::Removed => {
                    emit(json, json!({"id": id.as_str(), "outcome": word}), || {
                        format!("{id}: {word}")
                    })?
                }
                Cancelled::NotFound => {
                    return Err(Failure::Failed(format!(
                        "{id} is not pending on {topic} ({word}: unknown, done, or dead)"
                    )))
                }
                Cancelled::InFlight => {
                    return Err(Failure::Failed(format!(
                        "{id} is being handled right now ({word}); it was not stopped"
                    )))
                }
            }
        }
        Command::Pause { topic } => pause_or_resume(&p, json, &topic, true).await?,
        Command::Resume { topic } => pause_or_resume(&p, json, &topic, false).await?,
        Command::Dead(dead) => dead::run(&p, json, dead).await?,
        Command::Streams => {
            let streams = all_streams(&p).await?;
            warn_unreadable(&streams, "streams");
            emit(
                json,
                json!(streams
                    .iter()
                    .map(|e| e.json("stream", report::stream_json))
                    .collect::<Vec<_>>()),
                || {
                    let mut t = table(report::STREAMS_HEADER);
                    for e in &streams {
                        let rows = match &e.read {
                            Ok(s) => report::stream_rows(s),
                            Err(why) => vec![report::error_row(
                                &e.name,
                                why,
                                report::STREAMS_HEADER.len(),
                            )],
                        };
                        for row in rows {
                            t.add_row(row);
                        }
                    }
                    t.to_string()
                },
            )?;
        }
        Command::Rooms => {
            let rooms = all_rooms(&p).await?;
            warn_unreadable(&rooms, "rooms");
            emit(
                json,
                json!(rooms
                    .iter()
                    .map(|e| e.json("room", |c| report::room_json(&e.name, c)))
                    .collect::<Vec<_>>()),
                || {
                    let mut t = table(report::ROOMS_HEADER);
                    for e in &rooms {
                        t.add_row(match &e.read {
                            Ok(c) => report::room_row(&e.name, c),
                            Err(why) => report::error_row(&e.name, why, report::ROOMS_HEADER.len()),
                        });
                    }
                    t.to_string()
                },
            )?;
        }
        Command::Schedules { action } => schedules::run(&p, json, action).await?,
        Command::Config(_) => unreachable!("handled above"),
        Command::Dashboard {
            listen,
            allow_writes,
            allow_hosts,
            token,
        } => {
            let access = dashboard::Access::new(allow_writes, allow_hosts, token)?;
            dashboard::serve(p, listen, access).await?
        }
    }
    Ok(())
}

/// `delayq pause|resume TOPIC`: says whether the state changed.
async fn pause_or_resume(p: &Producer, json: bool, topic: &str, pause: bool) -> Outcome {
    known_topic(p, topic).await?;
    let changed = if pause {
        p.pause(topic).await?
    } else {
        p.resume(topic).await?
    };
    let word = match (pause, changed) {
        (true, true) => "paused",
        (true, false) => "already_paused",
        (false, true) => "resumed",
        (false, false) => "not_paused",
    };
    emit(json, json!({"topic": topic, "outcome": word}), || {
        format!("{topic}: {}", word.replace('_', " "))
    })?;
    Ok(())
}

async fn send(p: &Producer, json: bool, args: SendArgs) -> Outcome {
    let payload: Value = serde_json::from_str(&args.payload)
        .map_err(|e| Failure::Usage(format!("the payload is not JSON: {e}")))?;
    let mut options = SendOptions::new().delay(args.delay);
    if let Some(id) = args.id {
        options = options.id(id).replace(args.replace);
    }
    if let Some(n) = args.max_attempts {
        options = options.max_attempts(n);
    }
    let outcome = p.send_with(&args.topic, &payload, options).await?;
    let word = match &outcome {
        SendOutcome::Created(_) => "created",
        SendOutcome::Duplicate(_) => "duplicate",
        SendOutcome::Replaced(_) => "replaced",
    };
    let id = outcome.id();
    emit(
        json,
        json!({"id": id.as_str(), "outcome": word, "topic": args.topic}),
        || format!("{id}: {word} on {}", args.topic),
    )?;
    Ok(())
}

/// `delayq stats [TOPIC] --since 1h`: the histories as sparklines (JSON: the points): of
/// one topic, or of every topic, schedule, stream group and waiting room.
async fn history(p: &Producer, json: bool, topic: Option<String>, window: Duration) -> Outcome {
    let all = match topic {
        Some(topic) => {
            known_topic(p, &topic).await?;
            vec![(Kind::Topic, p.topic_history(&topic, window).await?)]
        }
        None => all_histories(p, window).await?,
    };
    emit(
        json,
        json!(all
            .iter()
            .map(|(kind, h)| report::history_json(*kind, h))
            .collect::<Vec<_>>()),
        || {
            all.iter()
                .map(|(kind, h)| report::history_text(*kind, h, window))
                .collect::<Vec<_>>()
                .join("\n")
        },
    )?;
    Ok(())
}
