//! Whole-flow actions: `retry_flow` and `cancel_flow`.

use redis::Value;

use super::keys::{step_message_id, FlowId, SCRIPTS};
use crate::error::{Error, Result};
use crate::producer::Producer;

fn word(v: Option<&Value>) -> String {
    match v {
        Some(Value::BulkString(b)) => String::from_utf8_lossy(b).into_owned(),
        Some(Value::SimpleString(s)) => s.clone(),
        _ => String::new(),
    }
}

/// `{ name, gen, topic }` triples of a script's reply.
fn steps_of(v: Option<&Value>) -> Vec<(String, u64, String)> {
    let Some(Value::Array(list)) = v else {
        return Vec::new();
    };
    list.iter()
        .filter_map(|s| match s {
            Value::Array(f) => {
                let gen = match f.get(1) {
                    Some(Value::Int(n)) => *n as u64,
                    other => word(other).parse().ok()?,
                };
                Some((word(f.first()), gen, word(f.get(2))))
            }
            _ => None,
        })
        .collect()
}

impl Producer {
    /// Cancels the older runs' messages still pending in their topics (a running one runs on,
    /// and changes nothing in the flow).
    async fn cancel_steps(&self, flow: &FlowId, steps: &[(String, u64, String)]) -> Result<()> {
        for (name, gen, topic) in steps {
            if topic.is_empty() {
                continue;
            }
            self.cancel(topic, &step_message_id(flow, name, *gen))
                .await?;
        }
        Ok(())
    }

    /// Runs the failed and cancelled steps of flow `id` again, and every step downstream of
    /// them; steps that succeeded keep their results and do not run again. Returns how many
    /// steps run again (0: none had failed or been cancelled); `None`: no such flow.
    ///
    /// # Errors
    /// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses a call.
    pub async fn retry_flow(&self, id: &FlowId) -> Result<Option<usize>> {
        let keys = self.flow_keys(id);
        let reply = self.flow_call(&keys, keys.invoke(&SCRIPTS.retry)).await?;
        let Value::Array(parts) = &reply else {
            return Err(Error::unexpected("retry flow", &reply));
        };
        let ttl = self.flow_ttl(id).await?;
        match word(parts.first()).as_str() {
            "gone" => return Ok(None),
            // Nothing failed: what a retry cut short left ready is sent all the same.
            "nothing" => {
                self.send_outbox(id, ttl).await?;
                return Ok(Some(0));
            }
            _ => {}
        }
        let again = match parts.get(1) {
            Some(Value::Int(n)) => *n as usize,
            _ => 0,
        };
        self.cancel_steps(id, &steps_of(parts.get(2))).await?;
        self.send_outbox(id, ttl).await?;
        Ok(Some(again))
    }

    /// Cancels flow `id`: its steps not sent yet never run, those sent are cancelled in their
    /// topics (one running now runs on, and changes nothing in the flow). `false` when it had
    /// ended already or does not exist.
    ///
    /// # Errors
    /// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses a call.
    pub async fn cancel_flow(&self, id: &FlowId) -> Result<bool> {
        let keys = self.flow_keys(id);
        let reply = self.flow_call(&keys, keys.invoke(&SCRIPTS.cancel)).await?;
        let Value::Array(parts) = &reply else {
            return Err(Error::unexpected("cancel flow", &reply));
        };
        // Cancelled before: its sent steps are cancelled in their topics again (a cancel cut
        // short left them there), which changes nothing when they are gone.
        self.cancel_steps(id, &steps_of(parts.get(1))).await?;
        Ok(word(parts.first()) == "cancelled")
    }
}
