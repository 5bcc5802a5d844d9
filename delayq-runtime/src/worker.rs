//! A worker runs one delivery: decode, call the handler (catching a panic),
//! renew its claim while it runs, then ack, retry or dead-letter as the mode says. The same
//! code runs a topic's messages and a stream's entries (each system's `run` starts it); only
//! the claim (`Settle`) differs.

use std::any::Any;
use std::future::Future;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, SystemTime};

use delayq_core::AckError;
use futures_util::FutureExt;
use tokio_util::sync::CancellationToken;

use crate::handler::{AfterRun, Failure, Kept, RunFuture};
use crate::health::{Health, RetryDelay};
use crate::meter::Meter;
use crate::settle::Settle;

/// What a run needs from its topic or stream.
pub(crate) struct RunContext<'a> {
    pub(crate) health: &'a Health,
    /// Cancelled when the shutdown grace is over.
    pub(crate) abort: &'a CancellationToken,
    /// How long the claim of a running handler holds: ack_timeout (topic) or min_idle
    /// (stream).
    pub(crate) claim_len: Duration,
    /// The run's hard limit (`timeout`), if any.
    pub(crate) timeout: Option<Duration>,
    /// Where a run stopped at its limit is counted.
    pub(crate) meter: &'a Meter,
}

fn panic_text(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a non-string panic payload".to_string()
    }
}

/// A handler run as `delayq_inflight` counts it, from its start until this is dropped.
pub(crate) struct Running<'a> {
    meter: &'a Meter,
    late: Duration,
}

impl<'a> Running<'a> {
    pub(crate) fn start(meter: &'a Meter, due: SystemTime) -> Self {
        let late = meter.started(due);
        Running { meter, late }
    }

    /// How late after its due time it started.
    pub(crate) fn late(&self) -> Duration {
        self.late
    }
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.meter.finished();
    }
}

/// With trace propagation on (feature `otel`), the `delayq.handle` span of a message sent from
/// a traced span follows from the sender's span; a missing or malformed traceparent leaves it
/// a root.
#[cfg(feature = "otel")]
pub(crate) fn follow_sender(span: &tracing::Span, traceparent: &str) {
    use tracing_opentelemetry::OpenTelemetrySpanExt;
    if let Some(parent) = delayq_core::protocol::parent_context(traceparent) {
        if let Err(error) = span.set_parent(parent) {
            tracing::debug!(%error, "the handler's span could not follow the sender's");
        }
    }
}

#[cfg(not(feature = "otel"))]
pub(crate) fn follow_sender(_span: &tracing::Span, _traceparent: &str) {}

/// Runs a settle call until it lands, is stale, or the shutdown grace ends. A settle that
/// never lands leaves the message claimed; it is delivered again after its deadline.
async fn settle<F, Fut>(ctx: &RunContext<'_>, what: &'static str, call: F)
where
    F: Fn() -> Fut,
    Fut: Future<Output = Result<(), AckError>>,
{
    let mut retry = RetryDelay::new();
    loop {
        match call().await {
            Ok(()) => {
                ctx.health.ok();
                return;
            }
            Err(AckError::Stale) => {
                tracing::warn!(
                    settle = what,
                    "ack not applied: this delivery is stale (its ack deadline passed and the message was delivered again)"
                );
                return;
            }
            Err(AckError::Failed(e)) => {
                ctx.health.failed(&e);
                tokio::select! {
                    _ = tokio::time::sleep(retry.next_delay()) => {}
                    _ = ctx.abort.cancelled() => return,
                }
            }
        }
    }
}

/// Runs a started handler to its end under its claim, then settles it as its mode says.
pub(crate) async fn drive<L: Settle>(
    ctx: &RunContext<'_>,
    claim: Arc<L>,
    started: Result<RunFuture, String>,
    after_run: impl Fn(Result<Kept, Failure>) -> AfterRun,
) {
    let future = match started {
        Ok(f) => f,
        Err(reason) => {
            tracing::error!(%reason, "payload does not decode; dead-lettered without retry");
            Box::pin(settle(ctx, "dead-letter", || claim.nack("", Some(&reason)))).await;
            return;
        }
    };
    // Polled in this task, not spawned: a spawn per delivery cost more than the rest of the
    // runtime's own work per message. A panic is caught here all the same.
    let mut handler = std::panic::AssertUnwindSafe(future).catch_unwind();
    // A run past its hard limit is over: its future is dropped (with everything it holds; a
    // task it spawned is detached, not stopped, and code that never yields cannot be stopped)
    // and it fails like an `Err`, so it is retried, backed off or dead-lettered, and its slot
    // is free at once. Without a limit the timer is never armed.
    // The run starts now: its limit and its first renewal count from here, however long its
    // first poll takes.
    let start = tokio::time::Instant::now();
    let deadline = ctx.timeout.map(|t| start + t);
    // Most handlers finish at their first poll: then no timer is made, and the waiting below,
    // a future of its own, is never built. It is boxed, so that the task a delivery runs in
    // stays small (under 1 KiB, where the allocator is fastest).
    let first = std::future::poll_fn(|cx| Poll::Ready(handler.poll_unpin(cx))).await;
    let (finished, stopped) = match first {
        Poll::Ready(result) => (result, false),
        Poll::Pending => {
            match Box::pin(wait(ctx, &*claim, &mut handler, (start, deadline))).await {
                Some(end) => end,
                // Shutdown grace is over: stop the handler (dropped here); the claim is handed
                // back.
                None => return,
            }
        }
    };
    // Drop the handler now (a run stopped at its limit is dropped mid-way), catching a panic in
    // its destructors as a panic in its body is caught: it must not end this task, which may
    // run other deliveries.
    if std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || drop(handler))).is_err() {
        tracing::error!("a handler panicked while it was dropped");
    }
    let result = match finished {
        Ok(result) => result,
        Err(panic) => Err(Failure::Error(format!(
            "handler panicked: {}",
            panic_text(&*panic)
        ))),
    };
    if claim.is_settled() {
        return;
    }
    match after_run(result) {
        AfterRun::Ack => Box::pin(settle(ctx, "ack", || claim.ack_after_run())).await,
        AfterRun::AckKeeping(value) => {
            Box::pin(settle(ctx, "ack", || claim.ack_keeping(&value))).await;
        }
        // Its timeout was logged when it was stopped.
        AfterRun::Retry(error) if stopped => {
            Box::pin(settle(ctx, "retry", || claim.timed_out(&error))).await;
        }
        AfterRun::Retry(error) => {
            tracing::warn!(%error, "handler failed");
            Box::pin(settle(ctx, "retry", || claim.nack(&error, None))).await;
        }
        AfterRun::Later(after, text) => {
            Box::pin(settle(ctx, "retry_after", || {
                claim.retry_after(after, &text)
            }))
            .await;
        }
        AfterRun::AwaitAck => {
            // Returned without acking: the ack deadline counts from now (a later one the
            // handler set with `extend` stays). If the Ack was dropped, the message is
            // delivered again after it.
            if let Err(AckError::Failed(error)) = Box::pin(claim.extend(ctx.claim_len)).await {
                ctx.health.failed(&error);
            }
            // Off the books once the deadline passed unsettled: by then it is redelivered.
            let ack_timeout = ctx.claim_len;
            tokio::spawn(async move {
                tokio::time::sleep(ack_timeout).await;
                if !claim.is_settled() {
                    claim.leave_books();
                }
            });
        }
    }
}

/// What a run that did not finish at its first poll waits for: the handler's end, its hard
/// limit (`deadline`), the renewal of its claim every third of the ack timeout from `start`
/// (the first one as soon as a first poll that took longer returns), and the end of the
/// shutdown grace (`None`: the run is abandoned). Returns the handler's result and whether the
/// run was stopped at its limit (then its failure is a timeout). A handler is not polled past
/// its limit: one that blocked past it and then yields is stopped there, not let finish.
async fn wait<L: Settle, H>(
    ctx: &RunContext<'_>,
    claim: &L,
    handler: &mut H,
    (start, deadline): (tokio::time::Instant, Option<tokio::time::Instant>),
) -> Option<(H::Output, bool)>
where
    H: Future<Output = std::thread::Result<Result<Kept, Failure>>> + Unpin,
{
    let ack_timeout = ctx.claim_len;
    let renew_every = ack_timeout / 3;
    let mut renew_at = start + renew_every;
    let past_limit = || deadline.is_some_and(|d| tokio::time::Instant::now() >= d);
    let mut claim_lost = false;
    let timed_out = || {
        let limit = ctx.timeout.unwrap_or_default();
        let error = format!(
            "timed out after {}",
            delayq_core::config::format_duration(limit)
        );
        // A run that settled its message (a manual ack) and then hung is stopped all the
        // same, but its message is not failed: it is neither counted nor retried.
        if !claim.is_settled() {
            ctx.meter.timed_out();
            tracing::warn!(%error, "handler stopped at its timeout");
        }
        Ok(Err(Failure::Error(error)))
    };
    let mut stopped = false;
    let finished = loop {
        tokio::select! {
            // The handler first.
            biased;
            // Past its limit, the handler waits (the limit's timer, armed, ends the run).
            result = std::future::poll_fn(|cx| {
                if past_limit() {
                    return Poll::Pending;
                }
                handler.poll_unpin(cx)
            }) => break result,
            _ = tokio::time::sleep_until(deadline.unwrap_or_else(tokio::time::Instant::now)), if deadline.is_some() => {
                stopped = true;
                break timed_out();
            }
            _ = tokio::time::sleep_until(renew_at), if !claim_lost => {
                if claim.is_settled() {
                    renew_at = tokio::time::Instant::now() + renew_every;
                    continue;
                }
                // A renewal on a slow or frozen Redis may take long: it never holds the run
                // past its limit.
                let renewal = Box::pin(claim.extend(ack_timeout));
                let renewed = match deadline {
                    Some(at) => match tokio::time::timeout_at(at, renewal).await {
                        Ok(renewed) => renewed,
                        Err(_) => {
                            stopped = true;
                            break timed_out();
                        }
                    },
                    None => renewal.await,
                };
                // The next one a third of the ack timeout after this one ended.
                renew_at = tokio::time::Instant::now() + renew_every;
                match renewed {
                    Ok(()) => ctx.health.ok(),
                    Err(AckError::Stale) => {
                        // Renewing again cannot win it back; say so once.
                        claim_lost = true;
                        tracing::warn!(
                            "lease lost while the handler runs (this process was stalled past the ack deadline?): the message was delivered again; this run's outcome will be refused"
                        );
                    }
                    Err(AckError::Failed(error)) => ctx.health.failed(&error),
                }
            }
            _ = ctx.abort.cancelled() => return None,
        }
    };
    Some((finished, stopped))
}
