//! The layout version of a namespace. Every namespace holds the version of the key layout and
//! envelope its data is in (`ns:layout`); a producer or runtime of another layout refuses to
//! touch it, with an error that says so, rather than misreading or corrupting it.

use std::sync::LazyLock;

use redis::Script;

use crate::error::{Error, Result};
use crate::producer::Producer;

/// The layout this build reads and writes.
pub const LAYOUT_VERSION: u32 = 2;

static LAYOUT: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("scripts/layout.lua")));

/// The key that holds a namespace's layout version.
pub(crate) fn layout_key(namespace: &str) -> String {
    format!("{namespace}:layout")
}

fn mismatch(producer: &Producer, held: String) -> Error {
    Error::LayoutMismatch {
        namespace: producer.namespace().to_string(),
        found: held,
        expected: LAYOUT_VERSION,
    }
}

impl Producer {
    /// Checks, once per producer and namespace, that the namespace holds this build's layout
    /// (marking a new namespace with it); [`Error::LayoutMismatch`] when it holds another.
    /// Sends and the runtime's start do this; call it to fail early.
    ///
    /// # Errors
    /// [`Error::LayoutMismatch`](crate::Error::LayoutMismatch) when the namespace holds another
    /// layout; [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses the
    /// call.
    pub async fn check_layout(&self) -> Result<()> {
        self.layout_checked
            .get_or_try_init(|| async {
                let mut inv = LAYOUT.key(layout_key(self.namespace()));
                inv.arg(LAYOUT_VERSION);
                let held: String = self.conn.run_script(inv).await?;
                if held == LAYOUT_VERSION.to_string() {
                    Ok(())
                } else {
                    Err(mismatch(self, held))
                }
            })
            .await
            .copied()
    }

    /// Refuses a namespace that holds another layout, like [`check_layout`](Self::check_layout),
    /// but leaves a new namespace unmarked: for tools that only look (the `delayq` CLI).
    ///
    /// # Errors
    /// [`Error::LayoutMismatch`](crate::Error::LayoutMismatch) when the namespace holds another
    /// layout; [`Error::Redis`](crate::Error::Redis) when Redis does not answer or refuses the
    /// call.
    pub async fn check_layout_read_only(&self) -> Result<()> {
        let key = layout_key(self.namespace());
        let key = &key;
        let held: Option<String> = self
            .conn
            .run(|mut c| async move { redis::cmd("GET").arg(key).query_async(&mut c).await })
            .await?;
        match held {
            Some(held) if held != LAYOUT_VERSION.to_string() => Err(mismatch(self, held)),
            _ => Ok(()),
        }
    }
}
