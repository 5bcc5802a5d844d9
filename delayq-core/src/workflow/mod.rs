//! Workflows: a [`Flow`] is a DAG of steps over any topics, each step an ordinary message of
//! its topic; a step is sent when every dependency ended as its edge needs (`OnFailure`).
//!
//! A flow lives in a slot of its own (`ns:{flow:<id>}:...`, see
//! `scripts/workflow/prelude.lua`), apart from its steps' topics, so on Redis Cluster no script
//! spans both. Each state change is one script on one side, and the calls between them are
//! idempotent, so a crash of any process between any two of them loses no step and runs none
//! twice:
//!
//! 1. `start_flow` writes the whole flow (`create.lua`; kept a day only, until a step ends),
//!    indexes the flow, notes its intent to send (`intent.rs`), sends the steps without
//!    dependencies, marks them sent (`sent.lua`) and drops the intent. A step's message id is `<flow>\x1f<step>\x1f<gen>` and is sent with
//!    `dedup_for` the flow's ttl: sent again (a retried call), it is a duplicate, pending or
//!    ended.
//! 2. A step's message ends (acked with its value, dead, or cancelled): the topic's script notes
//!    it in the topic's `steps` set, in the same step (`step_ended` in the delay prelude).
//! 3. The runtime then settles it in its flow with the flow's other steps that ended meanwhile
//!    (`settle.lua`: the steps that waited for them become ready, or fail under a Fail edge),
//!    sends the steps made ready, marks them sent, and drops the notes. The back pool's sweep
//!    does the same for notes left by a crash, and for the intents of senders that died.
//!
//! - `build.rs`: [`Flow`]; `check.rs`: its checks; `keys.rs`: a flow's keys and scripts;
//!   `start.rs`: starting; `outbox.rs`: sending ready steps; `intent.rs`: senders' intents and
//!   their sweep; `settle.rs`, `settled.rs`: settling ended steps; `read.rs`: [`FlowInfo`], `flow`,
//!   `wait_flow`; `list.rs`: `flows`; `actions.rs`: `retry_flow`, `cancel_flow`; `deps.rs`:
//!   what a step's dependencies ended with (`Dependencies`).

mod actions;
mod build;
mod check;
mod deps;
mod intent;
mod keys;
mod list;
mod outbox;
mod read;
mod settle;
mod settled;
mod start;

pub use build::{Flow, OnFailure, MAX_FLOW_STEPS};
pub use deps::Dependency;
pub use keys::{is_step_id, FlowId};
pub use read::{FlowInfo, FlowState, StepInfo, StepState};
pub use settle::{settle_ended_steps, settle_step, settle_steps, Settled, StepEnd};
