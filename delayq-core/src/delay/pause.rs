//! Pausing a topic: while its `paused` key is there, `claim_due` claims nothing in any
//! process (the check is in the script, so no claim slips past a pause); sends keep arriving,
//! running handlers finish, and the state outlives every process. A resume wakes the bosses.

use super::call::invoke;
use super::scripts;
use crate::error::Result;
use crate::producer::Producer;

impl Producer {
    /// Pauses `topic`: no process claims its messages until [`resume`](Self::resume); sends
    /// keep arriving and handlers already running finish. `false` when it already was paused.
    ///
    /// # Errors
    /// [`Error::InvalidTopic`](crate::Error::InvalidTopic) for a malformed topic;
    /// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses the call.
    pub async fn pause(&self, topic: &str) -> Result<bool> {
        let keys = self.keys(topic)?;
        let changed: u8 = invoke(&self.conn, &keys, &scripts::pause(&keys, true)).await?;
        Ok(changed == 1)
    }

    /// Resumes a paused `topic`: every process's boss claims what came due meanwhile at once.
    /// `false` when it was not paused.
    ///
    /// # Errors
    /// As [`pause`](Self::pause).
    pub async fn resume(&self, topic: &str) -> Result<bool> {
        let keys = self.keys(topic)?;
        let changed: u8 = invoke(&self.conn, &keys, &scripts::pause(&keys, false)).await?;
        Ok(changed == 1)
    }

    /// Whether `topic` is paused.
    ///
    /// # Errors
    /// As [`pause`](Self::pause).
    pub async fn is_paused(&self, topic: &str) -> Result<bool> {
        let keys = self.keys(topic)?;
        let key = &keys.paused;
        // A read: retried once on a lost connection.
        let once = || {
            super::call::on_topic(&self.conn, &keys, |mut c| async move {
                redis::cmd("EXISTS")
                    .arg(key)
                    .query_async::<bool>(&mut c)
                    .await
            })
        };
        self.conn.retry_once(once).await
    }
}
