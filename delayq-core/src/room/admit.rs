//! Admission: one tick of a room, in one script, fenced by the room's lease when the runtime
//! ticks it.

use std::time::Duration;

use redis::ScriptInvocation;

use super::waiting_room::{WaitingRoom, ROOM_SCRIPTS, SWEEP_PER_TICK};
use crate::error::{Error, Result};
use crate::lease::{LeaderLease, Leadership};
use crate::time::millis;

/// What one tick did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TickReport {
    /// Tokens admitted.
    pub admitted: usize,
    /// Waiting tokens expired (untouched for `waiting_ttl`).
    pub expired_waiting: usize,
    /// Admissions expired.
    pub expired_active: usize,
}

impl WaitingRoom {
    fn admit_call(&self, lease_value: &str) -> ScriptInvocation<'static> {
        let mut inv = self.script(&ROOM_SCRIPTS.admit);
        inv.arg(self.config.admit_per_tick)
            .arg(self.config.capacity.unwrap_or(0))
            .arg(millis(self.config.active_ttl))
            .arg(millis(self.config.waiting_ttl))
            // Touch records looked at: the admitted tokens' go at the rate they come.
            .arg(SWEEP_PER_TICK.max(2 * self.config.admit_per_tick as usize))
            .arg(lease_value)
            .arg(SWEEP_PER_TICK);
        inv
    }

    fn report(reply: Vec<usize>) -> Result<TickReport> {
        match reply[..] {
            [admitted, expired_waiting, expired_active] => Ok(TickReport {
                admitted,
                expired_waiting,
                expired_active,
            }),
            _ => Err(Error::unexpected("room admit", &reply)),
        }
    }

    /// One tick, run by hand: how many it admitted. The runtime ticks rooms named with
    /// `Runtime::builder().waiting_room(..)` under a lease, so that several processes never
    /// over-admit; calling this besides such a runtime admits more.
    ///
    /// # Errors
    /// [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses the call.
    pub async fn admit(&self) -> Result<usize> {
        let reply: Vec<usize> = self.invoke(self.admit_call("")).await?;
        Ok(Self::report(reply)?.admitted)
    }

    /// The lease under which one process at a time ticks the room (its key shares the room's
    /// slot, so that a tick can check it).
    #[doc(hidden)]
    pub fn lease(&self, ttl: Duration) -> Result<LeaderLease> {
        LeaderLease::with_key(
            self.producer.conn.clone(),
            &self.name,
            self.keys[5].clone(),
            ttl,
        )
    }

    /// One tick fenced by `leadership`: `None` when it no longer holds the room's lease (a
    /// stale ticker, refused without admitting).
    #[doc(hidden)]
    pub async fn admit_as(&self, leadership: &Leadership) -> Result<Option<TickReport>> {
        let reply: Option<Vec<usize>> = self
            .invoke(self.admit_call(leadership.lease_value()))
            .await?;
        reply.map(Self::report).transpose()
    }
}
