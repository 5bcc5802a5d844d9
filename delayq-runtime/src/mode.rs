//! How a listener's messages are settled after a run: the ack mode ([`AckMode`]: auto or
//! manual, picked by the handler's shape) and what follows a run ([`AfterRun`]).

use std::time::Duration;

use crate::handler::{Failure, Kept};

/// What the runtime does once a handler run has returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AfterRun {
    /// Ack the message.
    Ack,
    /// Ack the message, keeping this value (JSON) as its result.
    AckKeeping(Vec<u8>),
    /// Retry it after the backoff (or dead-letter it on its last attempt), keeping the error.
    Retry(String),
    /// Back after the delay without using an attempt, keeping the text.
    Later(Duration, String),
    /// Leave it to the `Ack` handle: the ack deadline counts from now.
    AwaitAck,
}

/// How a listener's messages are settled; the handler's shape picks the mode.
pub trait AckMode: 'static {
    /// The mode's name, for logs.
    const NAME: &'static str;
    /// What to do once a run returned `result` (and did not settle the message itself).
    fn after_run(result: Result<Kept, Failure>) -> AfterRun;
}

/// What a failed run leads to, in either mode.
fn failed(failure: Failure) -> AfterRun {
    match failure {
        Failure::Error(error) => AfterRun::Retry(error),
        Failure::Later(after, text) => AfterRun::Later(after, text),
    }
}

/// Auto ack: `Ok` acks, `Err` retries.
pub enum Auto {}
/// Manual ack: the handler's `Ack` settles; `Err` retries, `Ok` without an ack waits for one.
pub enum Manual {}

impl AckMode for Auto {
    const NAME: &'static str = "auto";
    fn after_run(result: Result<Kept, Failure>) -> AfterRun {
        match result {
            Ok(None) => AfterRun::Ack,
            Ok(Some(value)) => AfterRun::AckKeeping(value),
            Err(failure) => failed(failure),
        }
    }
}

impl AckMode for Manual {
    const NAME: &'static str = "manual";
    // A value returned by a manual handler is not kept: `ack.ack_with(&value)` keeps one.
    fn after_run(result: Result<Kept, Failure>) -> AfterRun {
        match result {
            Ok(_) => AfterRun::AwaitAck,
            Err(failure) => failed(failure),
        }
    }
}
