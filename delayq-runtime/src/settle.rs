//! What a delivery's hold on its message can do, for a topic's message and a stream's entry
//! alike: the worker and the user's `Ack` settle through it.

use std::future::Future;
use std::time::Duration;

use delayq_core::AckError;

/// One delivery's hold on its message.
pub(crate) trait Settle: Send + Sync + 'static {
    /// The id of the message (or stream entry).
    fn id(&self) -> &str;
    /// Which delivery this is: 1 on the first.
    fn attempt(&self) -> u32;
    /// Whether it has been acked, retried or dead-lettered (by the worker or the `Ack`).
    fn is_settled(&self) -> bool;
    /// Takes it off the books: settled, or another delivery owns the message now.
    fn leave_books(&self);
    /// Done.
    fn ack(&self) -> impl Future<Output = Result<(), AckError>> + Send;
    /// Done, acked by the worker after the handler returned: the run's slot may go with the
    /// ack (a topic's ack rides on the boss's next claim, see `ack_batcher.rs`).
    fn ack_after_run(&self) -> impl Future<Output = Result<(), AckError>> + Send {
        self.ack()
    }
    /// Done, keeping `value` (JSON) as the message's result. A stream entry keeps no result:
    /// it is acked, and the value is dropped.
    fn ack_keeping(&self, value: &[u8]) -> impl Future<Output = Result<(), AckError>> + Send {
        let _ = value;
        self.ack()
    }
    /// Failed with `error`: retry after the backoff, or dead-letter it when its attempts are
    /// used up (or at once, when `dead_reason` is given).
    fn nack(
        &self,
        error: &str,
        dead_reason: Option<&str>,
    ) -> impl Future<Output = Result<(), AckError>> + Send;
    /// Stopped at the listener's `timeout`: failed like `nack` (`error` says so), and counted
    /// as a timeout where the store keeps outcome counts (a topic's `delayq stats`).
    fn timed_out(&self, error: &str) -> impl Future<Output = Result<(), AckError>> + Send {
        self.nack(error, None)
    }
    /// Back after `after` without using an attempt (a stream entry comes back after `after`
    /// or `min_idle`, whichever is shorter).
    /// `note` is kept as the last error.
    fn retry_after(
        &self,
        after: Duration,
        note: &str,
    ) -> impl Future<Output = Result<(), AckError>> + Send;
    /// Keeps the message from being delivered again for at least `by` from now (never
    /// shortens what an earlier call gave).
    fn extend(&self, by: Duration) -> impl Future<Output = Result<(), AckError>> + Send;
}
