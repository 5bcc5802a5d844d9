//! The layout version of a namespace. Every namespace holds the version of the key layout and
//! envelope its data is in (`ns:layout`); a producer or runtime of another layout refuses to
//! touch it, with an error that says so, rather than misreading or corrupting it.

use std::sync::LazyLock;

use redis::Script;

use crate::error::{Error, Result};
use crate::producer::Producer;

/// The layout this build reads and writes.
pub const LAYOUT_VERSION: u32 = 3;

/// The layout this build upgrades in place: a producer or runtime of this build marks a
/// namespace of layout 2 with 3, which it reads as it is. Layout 3 keeps a claim's fence token
/// beside its envelope instead of in it (see `token_field` in prelude.lua): a process of an
/// earlier build would fence claims by the envelope alone, so once the mark is 3 it refuses to
/// start there. Its processes still running must stop before this build's start (no rolling
/// upgrade across this change: the guide's chapter *Deployments*).
const UPGRADES_FROM: u32 = 2;

/// Whether this build reads a namespace that holds `held`.
fn readable(held: &str) -> bool {
    held == LAYOUT_VERSION.to_string() || held == UPGRADES_FROM.to_string()
}

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
                inv.arg(LAYOUT_VERSION).arg(UPGRADES_FROM);
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
            Some(held) if !readable(&held) => Err(mismatch(self, held)),
            _ => Ok(()),
        }
    }
}
