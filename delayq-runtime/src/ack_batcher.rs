//! Ack coalescing. Workers of one topic hand their acks to one task, which sends whatever
//! has queued up as a single script call; while that call is in flight the next batch
//! gathers. Under load many acks share a round trip; when idle an ack goes out at once.

use delayq_core::protocol::TopicQueue;
use delayq_core::{Error, MessageId};
use tokio::sync::{mpsc, oneshot};

/// The most acks in one script call.
const MAX_BATCH: usize = 1_000;

struct AckRequest {
    id: MessageId,
    token: u64,
    reply: oneshot::Sender<Result<bool, Error>>,
}

/// Sends acks through the topic's batching task.
#[derive(Clone)]
pub(crate) struct AckBatcher(mpsc::UnboundedSender<AckRequest>);

impl AckBatcher {
    /// Starts the batching task; it ends when every sender is dropped.
    pub(crate) fn spawn(queue: TopicQueue) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(run(queue, rx));
        AckBatcher(tx)
    }

    /// `Ok(true)` acked, `Ok(false)` stale.
    pub(crate) async fn ack(&self, id: MessageId, token: u64) -> Result<bool, Error> {
        let (reply, answer) = oneshot::channel();
        self.0
            .send(AckRequest { id, token, reply })
            .map_err(|_| Error::Stopped)?;
        answer.await.map_err(|_| Error::Stopped)?
    }
}

async fn run(queue: TopicQueue, mut requests: mpsc::UnboundedReceiver<AckRequest>) {
    let mut batch = Vec::new();
    while let Some(first) = requests.recv().await {
        batch.push(first);
        while batch.len() < MAX_BATCH {
            match requests.try_recv() {
                Ok(r) => batch.push(r),
                Err(_) => break,
            }
        }
        let pairs: Vec<(MessageId, u64)> = batch.iter().map(|r| (r.id.clone(), r.token)).collect();
        match queue.ack(&pairs).await {
            Ok(acked) => {
                for (r, ok) in batch.drain(..).zip(acked) {
                    let _ = r.reply.send(Ok(ok));
                }
            }
            Err(e) => {
                let shared = std::sync::Arc::new(e);
                for r in batch.drain(..) {
                    let _ = r.reply.send(Err(Error::Shared(shared.clone())));
                }
            }
        }
    }
}
