//! The reader of a stream listener: blocks in `XREADGROUP … >` on a connection of its own,
//! asking for no more entries than there are free handler slots, and starts a worker per
//! entry (the workers of one read in a few tasks). An idle stream costs one blocked read a
//! minute. When the take-over has entries to take and no free slot, the reader gives up its
//! blocked read (closing its connection) and the slots it held for it.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::Either;
use futures_util::stream::{FuturesUnordered, StreamExt};

use delayq_core::protocol::{RedisConn, StreamEntry};
use tokio::sync::OwnedSemaphorePermit;
use tracing::Instrument;

use super::listener::{run_entry, StreamRuntime};
use crate::health::RetryDelay;

/// The longest a read blocks before it is issued again (capped by the connection).
const BLOCK: Duration = Duration::from_secs(60);
/// How long a read waits for more free slots once one is free.
const GATHER_WAIT: Duration = Duration::from_millis(2);

/// Entries one task runs at most. The entries of one read run in a few tasks, each polling
/// its handlers together, rather than a task each: a spawn per entry cost more than the rest of
/// the reader's work per entry. A large read still spreads over the runtime's threads.
const ENTRIES_PER_TASK: usize = 16;

/// The run of `entry` on `permit`: its worker, or, for a replay meant for another group, an
/// ack without running. Not boxed: it lives in its task's set as it is.
fn entry_run(
    stream: &Arc<StreamRuntime>,
    entry: StreamEntry,
    permit: OwnedSemaphorePermit,
) -> impl Future<Output = ()> + Send + use<> {
    if let Some(group) = entry
        .replay_for
        .as_deref()
        .filter(|g| **g != *stream.group_name)
    {
        tracing::debug!(id = %entry.id, replay_for = group, "a replay for another group; acked without running");
        let acks = stream.acks.clone();
        return Either::Left(async move {
            drop(permit);
            let _ = acks.ack(entry.id).await;
        });
    }
    let span = tracing::warn_span!(
        "delayq.handle",
        stream = %stream.stream,
        group = %stream.group_name,
        id = %entry.id,
        attempt = entry.deliveries
    );
    Either::Right(run_entry(stream.clone(), entry, permit).instrument(span))
}

/// Starts the runs of `entries`, each on its permit.
pub(crate) fn dispatch(
    stream: &Arc<StreamRuntime>,
    entries: Vec<(StreamEntry, OwnedSemaphorePermit)>,
) {
    let mut entries = entries.into_iter().peekable();
    while entries.peek().is_some() {
        let runs: FuturesUnordered<_> = entries
            .by_ref()
            .take(ENTRIES_PER_TASK)
            .map(|(entry, permit)| entry_run(stream, entry, permit))
            .collect();
        tokio::spawn(runs.for_each(|()| std::future::ready(())));
    }
}

/// Creates the group again (it was deleted, or the stream with it), retrying until Redis
/// answers or the runtime stops.
async fn create_group(stream: &StreamRuntime) -> bool {
    let mut retry = RetryDelay::new();
    loop {
        match stream.group.create(stream.from_start).await {
            Ok(created) => {
                stream.health.ok();
                if created {
                    tracing::info!(stream = %stream.stream, group = %stream.group_name, "created the consumer group");
                }
                return true;
            }
            Err(error) => stream.health.failed(&error),
        }
        tokio::select! {
            _ = tokio::time::sleep(retry.next_delay()) => {}
            _ = stream.stop.cancelled() => return false,
        }
    }
}

pub(crate) async fn run(stream: Arc<StreamRuntime>, conn: RedisConn) {
    let mut retry = RetryDelay::new();
    let mut reader = None;
    while !stream.stop.is_cancelled() {
        let conn_for_reads = match &reader {
            Some(r) => r,
            None => match conn.for_blocking().await {
                Ok(r) => reader.insert(r),
                Err(error) => {
                    stream.health.failed(&error);
                    tokio::select! {
                        _ = tokio::time::sleep(retry.next_delay()) => continue,
                        _ = stream.stop.cancelled() => return,
                    }
                }
            },
        };
        // Backpressure: read only when a slot is free, and no more than are free.
        let mut permits = tokio::select! {
            p = stream.slots.clone().acquire_owned() => match p { Ok(p) => p, Err(_) => return },
            _ = stream.stop.cancelled() => return,
        };
        // Under load, slots free one by one as handlers finish: wait a moment for a fuller
        // read (up to half the slots) rather than issuing a read per freed slot.
        let want = stream
            .batch()
            .min((stream.options.concurrency as usize / 2).max(1));
        if want > 1 {
            let more = stream.slots.clone().acquire_many_owned(want as u32 - 1);
            match tokio::time::timeout(GATHER_WAIT, more).await {
                Ok(Ok(more)) => permits.merge(more),
                _ => {
                    let free = stream.slots.available_permits().min(want - 1);
                    if let Ok(more) = stream.slots.clone().try_acquire_many_owned(free as u32) {
                        permits.merge(more);
                    }
                }
            }
        }
        let count = permits.num_permits();
        let read = tokio::select! {
            r = stream.group.read(conn_for_reads, count, BLOCK) => Some(r),
            // The take-over waits for a slot this read holds: drop the read with its
            // connection (Redis unblocks a closed client without delivering), and the slots.
            _ = stream.reader_yield.notified() => None,
            _ = stream.stop.cancelled() => return,
        };
        let Some(read) = read else {
            reader = None;
            drop(permits);
            continue;
        };
        match read {
            Ok(entries) => {
                stream.health.ok();
                retry.reset();
                let mut runs = Vec::with_capacity(entries.len());
                for entry in entries {
                    // One permit per entry read; those left over return when `permits` drops.
                    let permit = match permits.split(1) {
                        Some(p) => p,
                        None => match stream.slots.clone().acquire_owned().await {
                            Ok(p) => p,
                            Err(_) => return,
                        },
                    };
                    runs.push((entry, permit));
                }
                dispatch(&stream, runs);
            }
            Err(error) => {
                drop(permits);
                if error.to_string().contains("NOGROUP") {
                    // Someone deleted the stream or the group: create it again.
                    if !create_group(&stream).await {
                        return;
                    }
                    continue;
                }
                stream.health.failed(&error);
                tokio::select! {
                    _ = tokio::time::sleep(retry.next_delay()) => {}
                    _ = stream.stop.cancelled() => return,
                }
            }
        }
    }
}
