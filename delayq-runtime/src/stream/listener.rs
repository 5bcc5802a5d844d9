//! One stream listener at run time: what its reader, take-over and workers share.

use std::sync::Arc;
use std::time::Duration;

use delayq_core::protocol::{StreamEntry, StreamGroup};
use tokio::sync::{Notify, Semaphore};
use tokio_util::sync::CancellationToken;

use std::time::SystemTime;

use delayq_core::protocol::ms_to_time;
use tokio::sync::OwnedSemaphorePermit;

use super::claim::{StreamBooks, StreamClaim};
use super::message::StreamDelivery;
use super::registration::{StreamListenerRegistration, StreamSettings};
use crate::ack::Ack;
use crate::ack_batcher::AckBatcher;
use crate::handler::ErasedHandler;
use crate::health::Health;
use crate::meter::Meter;
use crate::options::ListenerOptions;
use crate::worker::{drive, RunContext, Running};

/// How often a consumer takes its share of idle entries: half of min_idle, within these
/// bounds. With the default min_idle of 60 s that is every 30 s, which with the blocked read
/// keeps an idle stream near 0.15 Redis commands a second.
const MIN_TAKE_OVER_EVERY: Duration = Duration::from_millis(50);
const MAX_TAKE_OVER_EVERY: Duration = Duration::from_secs(30);
/// A consumer counts as alive for this many take-over periods after its last heartbeat.
const ALIVE_PERIODS: u32 = 3;

pub(crate) struct StreamRuntime {
    pub(crate) stream: Arc<str>,
    pub(crate) group_name: Arc<str>,
    pub(crate) registration: &'static StreamListenerRegistration,
    /// `max_attempts` is max_deliveries, `ack_timeout` is min_idle.
    pub(crate) options: ListenerOptions,
    batch: u32,
    pub(crate) from_start: bool,
    pub(crate) handler: Arc<dyn ErasedHandler<StreamDelivery>>,
    pub(crate) group: StreamGroup,
    pub(crate) acks: AckBatcher<StreamGroup>,
    /// Free worker slots: reads and take-overs ask for no more than this.
    pub(crate) slots: Arc<Semaphore>,
    /// The take-over found entries to take but no free slot: the reader gives up a blocked
    /// read and the slots it holds for it, so a minute-long read cannot starve the take-over.
    pub(crate) reader_yield: Notify,
    /// Entries read or taken over here and not yet settled, handed back at shutdown.
    pub(crate) books: Arc<StreamBooks>,
    pub(crate) stop: CancellationToken,
    pub(crate) abort: CancellationToken,
    pub(crate) health: Health,
    pub(crate) meter: Arc<Meter>,
}

impl StreamRuntime {
    pub(crate) fn new(
        registration: &'static StreamListenerRegistration,
        settings: StreamSettings,
        group: StreamGroup,
        stop: CancellationToken,
        abort: CancellationToken,
    ) -> Arc<Self> {
        Arc::new(StreamRuntime {
            stream: registration.stream.into(),
            group_name: registration.group.into(),
            registration,
            options: settings.options,
            batch: settings.batch,
            from_start: settings.from_start,
            handler: (registration.handler)(),
            acks: AckBatcher::spawn(group.clone()),
            group,
            slots: Arc::new(Semaphore::new(settings.options.concurrency as usize)),
            reader_yield: Notify::new(),
            books: Arc::default(),
            stop,
            abort,
            health: Health::new(format!(
                "stream {} group {}",
                registration.stream, registration.group
            )),
            meter: Arc::new(Meter::stream(registration.stream, registration.group)),
        })
    }

    /// An entry idle this long may be taken over.
    pub(crate) fn min_idle(&self) -> Duration {
        self.options.ack_timeout()
    }

    /// The most entries one read asks for.
    pub(crate) fn batch(&self) -> usize {
        self.batch as usize
    }

    /// How often the take-over runs (and the heartbeat with it).
    pub(crate) fn take_over_every(&self) -> Duration {
        (self.min_idle() / 2).clamp(MIN_TAKE_OVER_EVERY, MAX_TAKE_OVER_EVERY)
    }

    /// How long a heartbeat keeps this consumer alive.
    pub(crate) fn alive_ttl(&self) -> Duration {
        self.take_over_every() * ALIVE_PERIODS
    }

    /// The claim of an entry just read or taken over, entered in the books.
    pub(crate) fn enter_claim(&self, entry: &StreamEntry) -> Arc<StreamClaim> {
        StreamClaim::enter(
            self.books.clone(),
            self.group.clone(),
            self.acks.clone(),
            self.meter.clone(),
            self.options,
            entry.id.clone(),
            entry.deliveries,
        )
    }
}

/// When a stream entry was added: the milliseconds of its id (`<ms>-<seq>`).
fn entry_time(id: &str) -> SystemTime {
    let ms = id.split('-').next().and_then(|ms| ms.parse().ok());
    ms.map_or_else(SystemTime::now, ms_to_time)
}

/// Runs a stream's entry.
pub(crate) async fn run_entry(
    stream: Arc<StreamRuntime>,
    entry: StreamEntry,
    permit: OwnedSemaphorePermit,
) {
    let claim = stream.enter_claim(&entry);
    let _running = Running::start(&stream.meter, entry_time(&entry.id));
    let inbound = StreamDelivery {
        stream: stream.stream.clone(),
        group: stream.group_name.clone(),
        entry,
    };
    let started = stream.handler.call(&inbound, Ack::new(claim.clone()));
    let ctx = RunContext {
        health: &stream.health,
        abort: &stream.abort,
        claim_len: stream.min_idle(),
        timeout: stream.options.timeout(),
        meter: &stream.meter,
    };
    let _permit = permit;
    let after_run = |result| stream.handler.after_run(result);
    drive(&ctx, claim, started, after_run).await;
}
