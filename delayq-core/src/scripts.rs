//! The Lua scripts, one per state change, each loaded once with the shared prelude in front.

use std::sync::LazyLock;

use redis::{Script, ScriptInvocation};

use crate::keys::TopicKeys;

const PRELUDE: &str = include_str!("scripts/prelude.lua");

macro_rules! scripts {
    ($($name:ident),* $(,)?) => {
        /// Every script, compiled (hashed) once per process.
        pub(crate) struct Scripts {
            $(pub(crate) $name: Script,)*
        }

        pub(crate) static SCRIPTS: LazyLock<Scripts> = LazyLock::new(|| Scripts {
            $($name: Script::new(&format!(
                "{PRELUDE}\n{}",
                include_str!(concat!("scripts/", stringify!($name), ".lua"))
            )),)*
        });
    };
}

scripts!(
    send,
    claim_due,
    ack,
    extend,
    nack,
    release,
    requeue_expired,
    cancel,
    reschedule,
    dead_list,
    replay_dead,
    purge_dead,
);

/// `script` on a topic: every script takes the topic's keys in one order, KEYS[1] delayed,
/// KEYS[2] inflight, KEYS[3] msg, KEYS[4] dead, KEYS[5] seq, and the wake channel as ARGV[1]
/// (see `prelude.lua`); its own arguments follow.
pub(crate) fn on_topic<'a>(script: &'a Script, k: &TopicKeys) -> ScriptInvocation<'a> {
    let mut inv = script.key(&k.delayed);
    inv.key(&k.inflight)
        .key(&k.msg)
        .key(&k.dead)
        .key(&k.seq)
        .arg(&k.wake);
    inv
}

/// The payload of a wake-up that tells the boss the head of `delayed` moved earlier
/// (`WAKE_BOSS` in `prelude.lua`).
pub const WAKE_BOSS: &[u8] = b"d";
/// The payload of a wake-up that tells the back pool a claim landed in an empty `inflight`
/// (`WAKE_BACK` in `prelude.lua`).
pub const WAKE_BACK: &[u8] = b"i";
