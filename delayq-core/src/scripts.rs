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

/// `script` with a topic's four state keys, in the order every script that takes them
/// declares them: KEYS[1] delayed, KEYS[2] inflight, KEYS[3] msg, KEYS[4] dead.
pub(crate) fn on_states<'a>(script: &'a Script, k: &TopicKeys) -> ScriptInvocation<'a> {
    let mut inv = script.key(&k.delayed);
    inv.key(&k.inflight).key(&k.msg).key(&k.dead);
    inv
}
