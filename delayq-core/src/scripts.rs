//! The Lua scripts, one per state change, each loaded once with the shared prelude in front.

use std::sync::LazyLock;

use redis::Script;

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
