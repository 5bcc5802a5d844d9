//! One function per command; each prints a table, or JSON with `--json`.

use std::time::SystemTime;

use delayq_core::{Cancelled, MessageId, Producer, SendOptions, SendOutcome};
use serde_json::{json, Value};

use crate::args::{Cli, Command, DeadCommand, DeadTarget, ScheduleCommand, SendArgs};
use crate::dashboard;
use crate::failure::Failure;
use crate::namespace::{
    all_rooms, all_schedules, all_stats, all_streams, change_dead, connect, DeadAction, Entry,
};
use crate::report::{self, table};

type Outcome = Result<(), Failure>;

/// What a command prints: JSON for `--json` (exact), else the table (or line) people read,
/// with control characters escaped (`report::printable_lines`).
fn emit(json: bool, value: Value, human: impl FnOnce() -> String) {
    if json {
        println!("{value}");
    } else {
        println!("{}", report::printable_lines(&human()));
    }
}

/// Fails (exit 1) unless `topic` is registered in the namespace: a typo should not look
/// like an empty topic.
async fn known_topic(p: &Producer, topic: &str) -> Outcome {
    delayq_core::validate_topic(topic)?;
    let topics = p.topics().await?;
    if topics.iter().any(|t| t == topic) {
        return Ok(());
    }
    let known = if topics.is_empty() {
        "none yet".to_string()
    } else {
        topics.join(", ")
    };
    Err(Failure::Failed(format!(
        "no topic {topic:?} in namespace {:?} (known: {known}); check the name, or --namespace / DELAYQ_NAMESPACE",
        p.namespace()
    )))
}

fn message_id(id: &str) -> Result<MessageId, Failure> {
    Ok(MessageId::new(id)?)
}

/// Warns on stderr how many entries could not be read (their rows say why).
fn warn_unreadable<T>(entries: &[Entry<T>], what: &str) {
    let bad = entries.iter().filter(|e| e.read.is_err()).count();
    if bad > 0 {
        eprintln!("warning: {bad} {what} could not be read (see their rows)");
    }
}

pub(crate) async fn run(cli: Cli) -> Outcome {
    let p = connect(&cli.redis_url, &cli.namespace).await?;
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
                    t.to_string()
                },
            );
        }
        Command::Stats { topic } => {
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
            );
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
            );
        }
        Command::Send(args) => send(&p, json, args).await?,
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
                    })
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
        Command::Dead(dead) => dead_command(&p, json, dead).await?,
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
            );
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
            );
        }
        Command::Schedules { action: None } => schedules(&p, json).await?,
        Command::Schedules {
            action: Some(ScheduleCommand::Remove { name }),
        } => {
            if !p.remove_schedule(&name).await? {
                return Err(Failure::NotFound(format!(
                    "no schedule {name:?} in namespace {:?}",
                    p.namespace()
                )));
            }
            emit(json, json!({ "removed": name }), || {
                format!("removed schedule {name}")
            });
        }
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
    );
    Ok(())
}

async fn dead_command(p: &Producer, json: bool, command: DeadCommand) -> Outcome {
    let now = SystemTime::now();
    match command {
        DeadCommand::List { topic, limit } => {
            known_topic(p, &topic).await?;
            let letters = p.dead_letters(&topic, 0..limit).await?;
            emit(
                json,
                json!(letters.iter().map(report::dead_json).collect::<Vec<_>>()),
                || {
                    let mut t = table(report::DEAD_HEADER);
                    for d in &letters {
                        t.add_row(report::dead_row(d, now));
                    }
                    t.to_string()
                },
            );
        }
        DeadCommand::Show { topic, id } => {
            known_topic(p, &topic).await?;
            let id = message_id(&id)?;
            let Some(letter) = p.dead_letter(&topic, &id).await? else {
                return Err(Failure::Failed(format!("{id} is not dead on {topic}")));
            };
            emit(json, report::dead_json(&letter), || {
                report::dead_detail(&letter, now).to_string()
            });
        }
        DeadCommand::Replay(target) => dead_change(p, json, DeadAction::Replay, target).await?,
        DeadCommand::Purge(target) => dead_change(p, json, DeadAction::Purge, target).await?,
    }
    Ok(())
}

async fn dead_change(p: &Producer, json: bool, action: DeadAction, target: DeadTarget) -> Outcome {
    let DeadTarget { topic, id, all } = target;
    known_topic(p, &topic).await?;
    let id = match (id, all) {
        (_, true) => None,
        (Some(id), false) => Some(message_id(&id)?),
        (None, false) => return Err(Failure::Usage("name an id, or --all".into())),
    };
    let n = change_dead(p, &topic, id.as_ref(), action).await?;
    let done = action.done();
    emit(json, json!({"topic": topic, done: n}), || {
        format!("{done} {n} on {topic}")
    });
    Ok(())
}

async fn schedules(p: &Producer, json: bool) -> Outcome {
    let all = all_schedules(p).await?;
    warn_unreadable(&all, "schedules");
    let now = SystemTime::now();
    emit(
        json,
        json!(all
            .iter()
            .map(|e| e.json("schedule", report::schedule_json))
            .collect::<Vec<_>>()),
        || {
            let mut t = table(report::SCHEDULES_HEADER);
            for e in &all {
                t.add_row(match &e.read {
                    Ok(s) => report::schedule_row(s, now),
                    Err(why) => report::error_row(&e.name, why, report::SCHEDULES_HEADER.len()),
                });
            }
            t.to_string()
        },
    );
    Ok(())
}
