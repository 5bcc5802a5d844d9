//! The namespace's flows, newest first (`delayq flows`, the dashboard).

use futures_util::StreamExt;

use super::keys::{index_key, FlowId};
use super::read::FlowState;
use crate::error::Result;
use crate::producer::Producer;

impl Producer {
    /// The namespace's flows, newest first: `(id, state)` of at most `limit`, only those in
    /// `state` when given. Flows removed after their ttl are left out, and dropped from the
    /// index as they are met (a page of 200 a call).
    ///
    /// # Errors
    /// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses the call.
    pub async fn flows(
        &self,
        state: Option<FlowState>,
        limit: usize,
    ) -> Result<Vec<(FlowId, FlowState)>> {
        const PAGE: usize = 200;
        let index = index_key(self.namespace());
        let mut out = Vec::new();
        let mut from = 0usize;
        while out.len() < limit {
            let ids: Vec<String> = self
                .conn
                .run(|mut c| {
                    let index = &index;
                    async move {
                        redis::cmd("ZRANGE")
                            .arg(index)
                            .arg(from)
                            .arg(from + PAGE - 1)
                            .arg("REV")
                            .query_async(&mut c)
                            .await
                    }
                })
                .await?;
            if ids.is_empty() {
                break;
            }
            let metas: Vec<String> = ids
                .iter()
                .map(|id| self.flow_keys(&FlowId(id.clone())).meta().to_string())
                .collect();
            // Each flow is in a slot of its own (no pipeline spans slots on a cluster): one
            // HGET a flow, 32 at once.
            let reads = metas
                .into_iter()
                .map(|m| async move { self.hget(&m, "state").await });
            let states: Vec<Option<String>> = futures_util::stream::iter(reads)
                .buffered(32)
                .collect::<Vec<_>>()
                .await
                .into_iter()
                .collect::<Result<_>>()?;
            let mut gone = Vec::new();
            for (id, s) in ids.iter().zip(states) {
                match s.as_deref().and_then(FlowState::parse) {
                    Some(s) if state.is_none_or(|want| want == s) && out.len() < limit => {
                        out.push((FlowId(id.clone()), s))
                    }
                    Some(_) => {}
                    None => gone.push(id.clone()),
                }
            }
            from += ids.len() - gone.len();
            if !gone.is_empty() {
                self.conn
                    .run(|mut c| {
                        let (index, gone) = (&index, &gone);
                        async move {
                            redis::cmd("ZREM")
                                .arg(index)
                                .arg(gone)
                                .query_async::<()>(&mut c)
                                .await
                        }
                    })
                    .await?;
            }
        }
        Ok(out)
    }
}
