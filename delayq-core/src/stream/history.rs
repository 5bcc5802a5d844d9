//! A stream group's history (see `crate::history`): what its consumers handled, how late
//! (an entry's lateness counts from its id's time), and its lag and pending entries, in the
//! stream's slot.

use std::time::Duration;

use super::group::StreamGroup;
use crate::error::Result;
use crate::history::{self, History, Sample, Tally};
use crate::names::validate_name;
use crate::producer::Producer;

/// The minutes and hours of `group` on `stream`: prefixes of their own, so that no two
/// groups share a key, whatever their names (a name may hold `:`).
fn history_keys(stream: &str, group: &str) -> (String, String) {
    (
        format!("{{{stream}}}:history:{group}"),
        format!("{{{stream}}}:history-hours:{group}"),
    )
}

impl StreamGroup {
    /// Adds what this process counted (`tally`) to the group's history, with its lag and
    /// pending entries. One script call.
    ///
    /// # Errors
    /// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses the call.
    pub async fn record_history(&self, tally: &Tally) -> Result<()> {
        let k = &self.keys;
        let (minutes, hours) = history_keys(&k.stream, &k.group);
        let sample = Sample::Group {
            stream: &k.stream,
            group: &k.group,
        };
        history::record(&self.conn, (&minutes, &hours), sample, tally).await
    }
}

impl Producer {
    /// The history of `group` on `stream`, as [`topic_history`](Self::topic_history) (its
    /// points' `delayed` and `due` are the group's lag, `inflight` its pending entries).
    ///
    /// # Errors
    /// [`Error::InvalidName`](crate::Error::InvalidName) for a malformed name;
    /// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses the call.
    pub async fn group_history(
        &self,
        stream: &str,
        group: &str,
        window: Duration,
    ) -> Result<History> {
        validate_name("stream", stream)?;
        validate_name("group", group)?;
        let (minutes, hours) = history_keys(stream, group);
        history::read(
            &self.conn,
            &format!("{stream}/{group}"),
            (&minutes, &hours),
            window,
        )
        .await
    }
}
