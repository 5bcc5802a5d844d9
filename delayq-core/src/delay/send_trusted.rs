//! Sending many messages of one topic whose ids and payloads were fixed and checked before
//! (a flow's ready steps, written and checked when the flow was started): one script call for
//! all that share their options.

use std::time::Duration;

use super::buckets::{declaring, Buckets};
use super::scripts::{self, Due, Outgoing};
use super::send_options::{SendOptions, When};
use crate::error::{Error, Result};
use crate::id::MessageId;
use crate::producer::Producer;
use crate::trace::current_traceparent;

/// One message to send: its id, its delay from now, its payload (JSON).
pub(crate) type Trusted = (MessageId, Duration, Vec<u8>);

impl Producer {
    /// Sends `messages` to `topic` in one call, each under its own id, with the options of
    /// `shared` (its priority, key, max_attempts and dedup_for; not its id, delay, replace
    /// or replicas). Returns each message's code: `c` created, `d` a duplicate of one sent
    /// before under its id. The ids are fixed: a lost connection is retried, its second run
    /// finding the first's messages as duplicates.
    ///
    /// # Errors
    /// [`Error::DueTooFar`] for a delay past what the topic takes, [`Error::InvalidOption`]
    /// for `max_attempts(0)`, [`Error::Redis`] when Redis does not answer or refuses the call.
    /// Nothing is sent on any of them.
    pub(crate) async fn send_trusted(
        &self,
        topic: &str,
        shared: &SendOptions,
        messages: &[Trusted],
    ) -> Result<Vec<u8>> {
        if messages.is_empty() {
            return Ok(Vec::new());
        }
        let keys = self.keys(topic)?;
        let max_attempts = shared.attempts_arg()?;
        let dues: Vec<Due> = messages
            .iter()
            .map(|(_, delay, _)| When::Delay(*delay).due())
            .collect::<Result<_>>()?;
        self.before_first_write(topic).await?;
        let trace = current_traceparent();
        let far = messages
            .iter()
            .zip(&dues)
            .fold(Buckets::default(), |far, ((id, _, _), due)| {
                far.due(&keys, due.expected_unix_ms()).id(&keys, id)
            });
        let outgoing = Outgoing {
            replace: false,
            at: false,
            max_attempts,
            dedup_ms: shared.dedup_ms(),
            priority: shared.priority.level(),
            key: shared.key.as_deref().unwrap_or(""),
            trace: &trace,
        };
        let build = |far: &Buckets| {
            let each = messages
                .iter()
                .zip(&dues)
                .map(|((id, _, payload), due)| (id, due.at_and_ms().1, payload.as_slice()));
            scripts::send(&keys, far, &outgoing, each)
        };
        let once = || declaring::<String>(&self.conn, &keys, far.clone(), build);
        let codes = self.conn.retry_once(once).await?;
        if codes.len() != messages.len() || !codes.bytes().all(|c| matches!(c, b'c' | b'd')) {
            return Err(Error::unexpected("send", &codes));
        }
        Ok(codes.into_bytes())
    }
}
