//! `start()`: the one-line runtime for `main`, with signal handling.

use delayq_core::{Error, Result};

use crate::builder::Runtime;

/// Waits for SIGINT (Ctrl-C) or SIGTERM.
async fn shutdown_signal() -> Result<()> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = signal(SignalKind::terminate()).map_err(|source| Error::Signal {
            signal: "SIGTERM",
            source,
        })?;
        tokio::select! {
            r = tokio::signal::ctrl_c() => r.map_err(|source| Error::Signal { signal: "SIGINT", source })?,
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    tokio::signal::ctrl_c()
        .await
        .map_err(|source| Error::Signal {
            signal: "Ctrl-C",
            source,
        })?;
    Ok(())
}

/// Runs every `#[delay_listener]` in this binary, configured from the environment, until
/// SIGINT or SIGTERM; then shuts down gracefully (see [`RuntimeHandle::shutdown`]).
pub async fn start() -> Result<()> {
    let handle = Runtime::builder().spawn().await?;
    shutdown_signal().await?;
    tracing::info!("signal received; shutting down");
    handle.shutdown().await
}
