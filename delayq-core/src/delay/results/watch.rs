//! Waiting for a hash field to leave a value (a flow's `state` leaving `running`) on the
//! producer's waits' hub: it listens on the channel the change is announced on before it
//! looks, so the wait sleeps until the change (or its timeout), polling nothing.

use tokio::time::Instant;

use super::hub::Watched;
use super::outcome::Outcome;
use crate::error::Result;
use crate::id::MessageId;
use crate::producer::Producer;

impl Producer {
    /// Waits until field `field` of hash `key` holds another value than `pending`, or
    /// `deadline`; returns the field then (`None`: gone). Whoever changes it announces it on
    /// `channel`; the hub's reads (after a resubscription, and every 5 s) cover a lost
    /// announcement.
    ///
    /// # Errors
    /// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses the read.
    pub(crate) async fn watch_field(
        &self,
        channel: &str,
        (key, field, pending): (&str, &str, &str),
        deadline: Instant,
    ) -> Result<Option<String>> {
        let watched = Watched::Field {
            key: key.to_string(),
            field: field.to_string(),
            pending: pending.to_string(),
        };
        let id = MessageId::from_stored(field.to_string());
        // A read's first `Unknown` (the field gone) answers it.
        let (waiter, start) = self.hub().register_on(channel, watched, &id, (true, true));
        if start {
            tokio::spawn(super::subscriber::run(self.hub().clone()));
        }
        // Listened before it looks: a change between the two is heard. (Not live by the
        // deadline, a slow Redis: it looks once more, and answers.)
        self.hub().until_live(channel, deadline).await;
        let read = || self.hget(key, field);
        // The look is bounded by the deadline; past it, one read answers (as a topic wait's).
        match tokio::time::timeout_at(deadline, read()).await {
            Ok(now) => match now? {
                Some(v) if v == pending => {}
                other => return Ok(other),
            },
            Err(_) => return read().await,
        }
        let mut waiter = waiter;
        match tokio::time::timeout_at(deadline, &mut waiter.answer).await {
            // What the announcement (or the hub's read) said: not read again, so a change
            // since (a flow retried at once) does not answer `pending` before the deadline.
            Ok(Ok(Outcome::Done(v))) => Ok(Some(String::from_utf8_lossy(&v).into_owned())),
            Ok(Ok(Outcome::Unknown)) => Ok(None),
            // The deadline (or a hub gone): the field as it stands.
            _ => read().await,
        }
    }
}
