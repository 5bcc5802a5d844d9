//! Ack coalescing. Workers of one topic (or stream) hand their acks to one task, which sends
//! whatever has queued up as a single call; while that call is in flight the next batch
//! gathers. Under load many acks share a round trip; when idle an ack goes out at once.

use std::future::Future;

use delayq_core::protocol::{StreamGroup, TopicQueue};
use delayq_core::{Error, MessageId};
use tokio::sync::{mpsc, oneshot};

/// The most acks in one call.
const MAX_BATCH: usize = 1_000;

/// Where a batch of acks goes: one call, one answer per item (`true` acked, `false` stale).
pub(crate) trait AckSink: Send + Sync + 'static {
    /// What identifies one delivery to ack.
    type Item: Clone + Send + 'static;
    fn ack_all(
        &self,
        items: Vec<Self::Item>,
    ) -> impl Future<Output = Result<Vec<bool>, Error>> + Send;
}

impl AckSink for TopicQueue {
    type Item = (MessageId, u64);
    async fn ack_all(&self, items: Vec<Self::Item>) -> Result<Vec<bool>, Error> {
        self.ack(&items).await
    }
}

impl AckSink for StreamGroup {
    type Item = String;
    async fn ack_all(&self, items: Vec<Self::Item>) -> Result<Vec<bool>, Error> {
        self.ack(&items).await
    }
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
    let mut batch = Vec::new();
    while let Some(first) = requests.recv().await {
        batch.push(first);
        while batch.len() < MAX_BATCH {
            match requests.try_recv() {
                Ok(r) => batch.push(r),
                Err(_) => break,
            }
        }
        let items: Vec<S::Item> = batch.iter().map(|r| r.item.clone()).collect();
        match sink.ack_all(items).await {
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
