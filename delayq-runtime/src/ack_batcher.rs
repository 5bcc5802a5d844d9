//! Ack coalescing. Workers of one topic (or stream) hand their acks to one task, which sends
//! whatever has queued up as a single call; while that call is in flight the next batch
//! gathers (and the first ack waits for the handlers already woken: one yield). Under load many
//! acks share a round trip; when idle an ack goes out at once.
//! Each system says how a batch is acked (`AckSink`, implemented in `delay/claim.rs` and
//! `stream/claim.rs`).
//!
//! Riding: while a topic's boss claims again as soon as a slot frees (more is due), it takes
//! the acks of handlers that returned, with their slots, onto its next claim ([`Riders`]): one
//! call instead of two, and the acks land before the claim in that call, so what the topic
//! holds in flight never exceeds its slots. Only an ack that lends its run's slot rides (a
//! handler that acks by hand before it returns still runs on it); the others, and every ack
//! while the boss sleeps, go through the task.

use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};

use delayq_core::Error;
use tokio::sync::{mpsc, oneshot, Notify, OwnedSemaphorePermit};

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
    /// The slot of the run that acks, held until the ack is answered (riding: lent to the
    /// claim that carries it).
    slot: Option<OwnedSemaphorePermit>,
}

/// Acks waiting for the boss's next claim, and whether the boss takes them.
struct RiderState<I> {
    riding: bool,
    waiting: Vec<AckRequest<I>>,
}

struct Shared<I> {
    state: Mutex<RiderState<I>>,
    /// An ack arrived for the boss.
    arrived: Notify,
}

/// Sends acks through the batching task of one sink (or onto the boss's claims).
pub(crate) struct AckBatcher<S: AckSink> {
    task: mpsc::UnboundedSender<AckRequest<S::Item>>,
    riders: Arc<Shared<S::Item>>,
}

impl<S: AckSink> Clone for AckBatcher<S> {
    fn clone(&self) -> Self {
        AckBatcher {
            task: self.task.clone(),
            riders: self.riders.clone(),
        }
    }
}

impl<S: AckSink> AckBatcher<S> {
    /// Starts the batching task; it ends when every sender is dropped.
    pub(crate) fn spawn(sink: S) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(run(sink, rx));
        AckBatcher {
            task: tx,
            riders: Arc::new(Shared {
                state: Mutex::new(RiderState {
                    riding: false,
                    waiting: Vec::new(),
                }),
                arrived: Notify::new(),
            }),
        }
    }

    fn state(&self) -> MutexGuard<'_, RiderState<S::Item>> {
        self.riders.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `Ok(true)` acked, `Ok(false)` stale. `slot`: the run's slot, which the ack lends to
    /// the claim it rides on (freed once the ack is answered).
    pub(crate) async fn ack(
        &self,
        item: S::Item,
        slot: Option<OwnedSemaphorePermit>,
    ) -> Result<bool, Error> {
        let (reply, answer) = oneshot::channel();
        let request = AckRequest { item, reply, slot };
        {
            // Under the lock: a boss that stops riding hands what waits to the task in order.
            let mut state = self.state();
            if state.riding && request.slot.is_some() {
                state.waiting.push(request);
                drop(state);
                self.riders.arrived.notify_one();
            } else {
                self.task.send(request).map_err(|_| Error::Stopped)?;
            }
        }
        answer.await.map_err(|_| Error::Stopped)?
    }

    /// The boss claims again as soon as a slot frees (`true`), and takes the acks that lend
    /// slots; or it does not (`false`), and what waits goes to the task.
    pub(crate) fn ride(&self, riding: bool) {
        let mut state = self.state();
        state.riding = riding;
        if !riding {
            for request in state.waiting.drain(..) {
                // The task outlives every handle; were it gone, dropping the request answers
                // its ack `Stopped`.
                let _ = self.task.send(request);
            }
        }
    }

    /// Resolves when an ack arrived for the boss (perhaps already taken).
    pub(crate) async fn arrived(&self) {
        self.riders.arrived.notified().await;
    }

    /// Up to `max` of the acks waiting for the boss, and their slots.
    pub(crate) fn take(&self, max: usize) -> (Riders<S::Item>, Vec<OwnedSemaphorePermit>) {
        let mut state = self.state();
        let n = state.waiting.len().min(max);
        let mut riders = Riders {
            items: Vec::with_capacity(n),
            replies: Vec::with_capacity(n),
        };
        let mut slots = Vec::with_capacity(n);
        for r in state.waiting.drain(..n) {
            riders.items.push(r.item);
            riders.replies.push(r.reply);
            slots.extend(r.slot);
        }
        (riders, slots)
    }
}

/// Acks taken onto a claim: the items go in the call, the replies wait for its answer.
pub(crate) struct Riders<I> {
    pub(crate) items: Vec<I>,
    replies: Vec<oneshot::Sender<Result<bool, Error>>>,
}

impl<I> Riders<I> {
    /// Answers each ack: the call's answers in order, or its error.
    pub(crate) fn answer(self, answers: Result<&[bool], Arc<Error>>) {
        answer(self.replies, answers);
    }
}

fn answer(
    replies: impl IntoIterator<Item = oneshot::Sender<Result<bool, Error>>>,
    answers: Result<&[bool], Arc<Error>>,
) {
    match answers {
        Ok(acked) => {
            for (reply, ok) in replies.into_iter().zip(acked) {
                let _ = reply.send(Ok(*ok));
            }
        }
        Err(shared) => {
            for reply in replies {
                let _ = reply.send(Err(Error::Shared(shared.clone())));
            }
        }
    }
}

async fn run<S: AckSink>(sink: S, mut requests: mpsc::UnboundedReceiver<AckRequest<S::Item>>) {
    let mut replies = Vec::new();
    let mut slots = Vec::new();
    while let Some(first) = requests.recv().await {
        // Handlers finish together (their messages were claimed together): those already woken
        // run first and queue theirs, so that the first ack of a burst does not go alone.
        tokio::task::yield_now().await;
        // The items go to the sink by value, the replies (and slots) wait here.
        let mut items = Vec::with_capacity(requests.len().min(MAX_BATCH - 1) + 1);
        let mut next = Some(first);
        while let Some(r) = next.take() {
            items.push(r.item);
            replies.push(r.reply);
            slots.extend(r.slot);
            if replies.len() < MAX_BATCH {
                next = requests.try_recv().ok();
            }
        }
        match sink.ack_all(items).await {
            Ok(acked) => answer(replies.drain(..), Ok(&acked)),
            Err(e) => answer(replies.drain(..), Err(Arc::new(e))),
        }
        slots.clear();
    }
}
