//! Ack coalescing. Workers of one topic (or stream) hand their acks to one task, which sends
//! whatever has queued up as a single call; while that call is in flight the next batch
//! gathers (and the first ack waits for the handlers already woken: one yield). Under load many
//! acks share a round trip; when idle an ack goes out at once.
//! Each system says how a batch is acked (`AckSink`, implemented in `delay/claim.rs` and
//! `stream/claim.rs`).

use std::future::Future;

use delayq_core::Error;
use tokio::sync::{mpsc, oneshot};

/// The most acks in one call.
const MAX_BATCH: usize = 1_000;

/// Where a batch of acks goes: one call, one answer per item (`true` acked, `false` stale).
pub(crate) trait AckSink: Send + Sync + 'static {
    /// What identifies one delivery to ack.
    type Item: Send + 'static;
    /// Acks `items` in one call.
    fn ack_all(
        &self,
        items: Vec<Self::Item>,
    ) -> impl Future<Output = Result<Vec<bool>, Error>> + Send;
}

struct AckRequest<I> {
    item: I,
    reply: oneshot::Sender<Result<bool, Error>>,
}

/// Sends acks through the batching task of one sink.
pub(crate) struct AckBatcher<S: AckSink>(mpsc::UnboundedSender<AckRequest<S::Item>>);

impl<S: AckSink> Clone for AckBatcher<S> {
    fn clone(&self) -> Self {
        AckBatcher(self.0.clone())
    }
}

impl<S: AckSink> AckBatcher<S> {
    /// Starts the batching task; it ends when every sender is dropped.
    pub(crate) fn spawn(sink: S) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(run(sink, rx));
        AckBatcher(tx)
    }

    /// `Ok(true)` acked, `Ok(false)` stale.
    pub(crate) async fn ack(&self, item: S::Item) -> Result<bool, Error> {
        let (reply, answer) = oneshot::channel();
        self.0
            .send(AckRequest { item, reply })
            .map_err(|_| Error::Stopped)?;
        answer.await.map_err(|_| Error::Stopped)?
    }
}

async fn run<S: AckSink>(sink: S, mut requests: mpsc::UnboundedReceiver<AckRequest<S::Item>>) {
    let mut replies = Vec::new();
    while let Some(first) = requests.recv().await {
        // Handlers finish together (their messages were claimed together): those already woken
        // run first and queue theirs, so that the first ack of a burst does not go alone.
        tokio::task::yield_now().await;
        // The items go to the sink by value, the replies wait here.
        let mut items = Vec::with_capacity(requests.len().min(MAX_BATCH - 1) + 1);
        let mut next = Some(first);
        while let Some(r) = next.take() {
            items.push(r.item);
            replies.push(r.reply);
            if replies.len() < MAX_BATCH {
                next = requests.try_recv().ok();
            }
        }
        match sink.ack_all(items).await {
            Ok(acked) => {
                for (reply, ok) in replies.drain(..).zip(acked) {
                    let _ = reply.send(Ok(ok));
                }
            }
            Err(e) => {
                let shared = std::sync::Arc::new(e);
                for reply in replies.drain(..) {
                    let _ = reply.send(Err(Error::Shared(shared.clone())));
                }
            }
        }
    }
}
