//! Ack coalescing. Workers of one topic (or stream) hand their acks to one task, which sends
//! whatever has queued up as a single call; while that call is in flight the next batch
//! gathers (and the first ack waits for the handlers already woken: one yield). Under load many
//! acks share a round trip; when idle an ack goes out at once.
//! Each system says how a batch is acked (`AckSink`, implemented in `delay/claim.rs` and
//! `stream/claim.rs`).
//!
//! Riding: while a topic's boss claims again as soon as a slot frees (more is due), it takes
//! the acks of handlers that returned, with their slots, onto its next claim ([`Riders`]): one
//! call instead of two (the acks go last in it: a claim that fails fails before them, and they
//! are sent again). The slots come to the claim only once the acks are answered; after an
//! error each goes back to its run, which holds it while it retries its ack. Only an ack that
//! lends its run's slot rides (a handler that acks by hand before it returns still runs on
//! it); the others, and every ack while the boss sleeps, go through the task.

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

/// What an ack is answered: acked (`true`) or stale, or the call's error. A lent slot comes
/// back with an error (the run keeps it while it tries again); with an answer it is free.
type Answer = (Result<bool, Error>, Option<OwnedSemaphorePermit>);

struct AckRequest<I> {
    item: I,
    reply: oneshot::Sender<Answer>,
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

    /// `Ok(true)` acked, `Ok(false)` stale.
    pub(crate) async fn ack(&self, item: S::Item) -> Result<bool, Error> {
        self.ack_lending(item, None).await.0
    }

    /// The same, lending the run's `slot` to the claim the ack rides on (freed once the ack is
    /// answered); after an error the slot comes back, for the run to keep while it retries.
    pub(crate) async fn ack_lending(
        &self,
        item: S::Item,
        slot: Option<OwnedSemaphorePermit>,
    ) -> Answer {
        let (reply, answer) = oneshot::channel();
        let request = AckRequest { item, reply, slot };
        {
            // Under the lock: a boss that stops riding hands what waits to the task in order.
            let mut state = self.state();
            if state.riding && request.slot.is_some() {
                state.waiting.push(request);
                drop(state);
                self.riders.arrived.notify_one();
            } else if let Err(mpsc::error::SendError(request)) = self.task.send(request) {
                return (Err(Error::Stopped), request.slot);
            }
        }
        answer.await.unwrap_or((Err(Error::Stopped), None))
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

    /// Up to `max` of the acks waiting for the boss, with their slots. When more wait, the
    /// boss is woken again for them (one wake-up may stand for many acks).
    pub(crate) fn take(&self, max: usize) -> Riders<S::Item> {
        let mut state = self.state();
        let n = state.waiting.len().min(max);
        let mut riders = Riders {
            items: Vec::with_capacity(n),
            replies: Vec::with_capacity(n),
        };
        for r in state.waiting.drain(..n) {
            riders.items.push(r.item);
            riders.replies.push((r.reply, r.slot));
        }
        let more = !state.waiting.is_empty();
        drop(state);
        if more {
            self.riders.arrived.notify_one();
        }
        riders
    }
}

/// Acks taken onto a claim: the items go in the call, the replies (and the slots lent) wait
/// for its answer.
pub(crate) struct Riders<I> {
    pub(crate) items: Vec<I>,
    replies: Vec<(oneshot::Sender<Answer>, Option<OwnedSemaphorePermit>)>,
}

impl<I> Riders<I> {
    /// The slots they lend.
    pub(crate) fn lent(&self) -> usize {
        self.replies.iter().filter(|r| r.1.is_some()).count()
    }

    /// Answers each ack: the call's answers in order (their slots are the caller's now), or
    /// its error (the slots go back to the runs).
    pub(crate) fn answer(self, answers: Result<&[bool], Arc<Error>>) -> Vec<OwnedSemaphorePermit> {
        answer(self.replies, answers)
    }
}

/// Answers acks; returns the slots freed (none after an error: they went back).
fn answer(
    replies: Vec<(oneshot::Sender<Answer>, Option<OwnedSemaphorePermit>)>,
    answers: Result<&[bool], Arc<Error>>,
) -> Vec<OwnedSemaphorePermit> {
    let mut freed = Vec::new();
    match answers {
        Ok(acked) => {
            for ((reply, slot), ok) in replies.into_iter().zip(acked) {
                let _ = reply.send((Ok(*ok), None));
                freed.extend(slot);
            }
        }
        Err(shared) => {
            for (reply, slot) in replies {
                let _ = reply.send((Err(Error::Shared(shared.clone())), slot));
            }
        }
    }
    freed
}

async fn run<S: AckSink>(sink: S, mut requests: mpsc::UnboundedReceiver<AckRequest<S::Item>>) {
    while let Some(first) = requests.recv().await {
        // Handlers finish together (their messages were claimed together): those already woken
        // run first and queue theirs, so that the first ack of a burst does not go alone.
        tokio::task::yield_now().await;
        // The items go to the sink by value, the replies (and slots) wait here.
        let mut items = Vec::with_capacity(requests.len().min(MAX_BATCH - 1) + 1);
        let mut replies = Vec::with_capacity(items.capacity());
        let mut next = Some(first);
        while let Some(r) = next.take() {
            items.push(r.item);
            replies.push((r.reply, r.slot));
            if replies.len() < MAX_BATCH {
                next = requests.try_recv().ok();
            }
        }
        let freed = match sink.ack_all(items).await {
            Ok(acked) => answer(replies, Ok(&acked)),
            Err(e) => answer(replies, Err(Arc::new(e))),
        };
        // Answered: the slots lent are free.
        drop(freed);
    }
}
