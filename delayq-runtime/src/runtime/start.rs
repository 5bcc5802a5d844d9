//! `start()`: the one-line runtime for `main`, with signal handling.

use delayq_core::{Error, Result};

use super::builder::Runtime;

/// SIGINT (Ctrl-C) and SIGTERM, listened for from the moment this is made: made before the
/// runtime starts, so that a signal arriving while it starts up (a message may already be
/// claimed) shuts it down gracefully instead of ending the process.
#[cfg(unix)]
struct ShutdownSignals {
    interrupt: tokio::signal::unix::Signal,
    terminate: tokio::signal::unix::Signal,
}

#[cfg(unix)]
impl ShutdownSignals {
    fn listen() -> Result<Self> {
        use tokio::signal::unix::{signal, SignalKind};
        let listen = |kind, name| {
            signal(kind).map_err(|source| Error::Signal {
                signal: name,
                source,
            })
        };
        Ok(Self {
            interrupt: listen(SignalKind::interrupt(), "SIGINT")?,
            terminate: listen(SignalKind::terminate(), "SIGTERM")?,
        })
    }

    async fn received(mut self) -> Result<()> {
        tokio::select! {
            _ = self.interrupt.recv() => {}
            _ = self.terminate.recv() => {}
        }
        Ok(())
    }
}

#[cfg(not(unix))]
struct ShutdownSignals;

#[cfg(not(unix))]
impl ShutdownSignals {
    fn listen() -> Result<Self> {
        Ok(Self)
    }

    async fn received(self) -> Result<()> {
        tokio::signal::ctrl_c()
            .await
            .map_err(|source| Error::Signal {
                signal: "Ctrl-C",
                source,
            })
    }
}

/// Runs every `#[delay_listener]` (and stream listener, leader task, schedule) in this
/// binary, configured from `delayq.toml` and the environment, until SIGINT or SIGTERM; then
/// shuts down gracefully (see [`RuntimeHandle::shutdown`](crate::RuntimeHandle::shutdown)).
///
/// # Errors
/// What [`RuntimeBuilder::spawn`](crate::RuntimeBuilder::spawn) refuses with, a signal that
/// cannot be listened for, and [`Error::Unreturned`] from the shutdown.
pub async fn start() -> Result<()> {
    let signals = ShutdownSignals::listen()?;
    let handle = Runtime::builder()
        .shutdown_on(async move {
            if let Err(error) = signals.received().await {
                tracing::error!(%error, "cannot wait for a signal; shutting down");
            }
        })
        .spawn()
        .await?;
    handle.stopped().await
}
