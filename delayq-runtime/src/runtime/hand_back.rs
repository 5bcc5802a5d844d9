//! Handing back at shutdown what was claimed and not settled: a topic's claims (released,
//! due at once, the attempt not used) and a stream's entries.

use delayq_core::protocol::MAX_CLAIM_BATCH;
use tokio::time::Instant;

use crate::delay::TopicRuntime;
use crate::stream::StreamRuntime;

/// How many ids of what could not be handed back a shutdown log line lists.
const LOGGED_IDS: usize = 20;

/// Hands a topic's unsettled claims back; (handed back, not handed back), the latter counting
/// what a claim call on its way when the boss ended took.
pub(super) async fn hand_back_claims(t: &TopicRuntime, deadline: Instant) -> (usize, usize) {
    let (mut handed_back, mut unreturned) = (0, 0);
    let unsettled = t.books.take_unsettled();
    for chunk in unsettled.chunks(MAX_CLAIM_BATCH) {
        match tokio::time::timeout_at(deadline, t.queue.release(chunk)).await {
            Ok(Ok(n)) => handed_back += n,
            outcome => {
                unreturned += chunk.len();
                let error = match outcome {
                    Ok(Err(e)) => e.to_string(),
                    _ => "Redis did not answer before the shutdown deadline".to_string(),
                };
                let ids: Vec<&str> = chunk
                    .iter()
                    .take(LOGGED_IDS)
                    .map(|(id, _)| id.as_str())
                    .collect();
                tracing::error!(
                    topic = %t.name,
                    %error,
                    count = chunk.len(),
                    ?ids,
                    "could not hand claimed messages back; they are delivered again after their ack deadline"
                );
            }
        }
    }
    // A claim call on its way when the boss ended (the grace ran out while Redis had
    // not answered): what it took can be neither run nor handed back.
    let on_way = t.claims_on_way.load(std::sync::atomic::Ordering::Relaxed);
    if on_way > 0 {
        unreturned += on_way;
        tracing::error!(
            topic = %t.name,
            count = on_way,
            "a claim was on its way when the shutdown ended it; the messages it took (up to this many) are delivered again after their ack deadline"
        );
    }
    (handed_back, unreturned)
}

/// Hands a stream's unsettled entries back (takeable at once, the delivery not counted) and
/// leaves its alive set; (handed back, not handed back).
pub(super) async fn hand_back_entries(s: &StreamRuntime, deadline: Instant) -> (usize, usize) {
    let unsettled = s.books.take_unsettled();
    let mut handed_back = 0;
    let leave = tokio::time::timeout_at(deadline, s.group.leave()).await;
    if !matches!(leave, Ok(Ok(()))) {
        tracing::debug!(stream = %s.stream, group = %s.group_name, "could not leave the alive set; it expires by itself");
    }
    for chunk in unsettled.chunks(MAX_CLAIM_BATCH) {
        match tokio::time::timeout_at(deadline, s.group.hand_back(chunk, s.min_idle())).await {
            Ok(Ok(n)) => handed_back += n,
            outcome => {
                let error = match outcome {
                    Ok(Err(e)) => e.to_string(),
                    _ => "Redis did not answer before the shutdown deadline".to_string(),
                };
                let ids: Vec<&str> = chunk.iter().take(LOGGED_IDS).map(|id| &**id).collect();
                tracing::error!(
                    stream = %s.stream,
                    group = %s.group_name,
                    %error,
                    count = chunk.len(),
                    ?ids,
                    "could not hand entries back; another consumer takes them over after min_idle"
                );
                return (handed_back, unsettled.len() - handed_back);
            }
        }
    }
    (handed_back, 0)
}
