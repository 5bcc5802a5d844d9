//! The waiting room: an admission queue for traffic peaks. People get a token and wait in
//! line; each tick admits the earliest arrivals, in one script, at a fixed rate or up to a
//! capacity. Every key of a room shares the hash tag `{room:<name>}`.

//!
//! - `config.rs`: [`RoomConfig`], how a room admits.
//! - `waiting_room.rs`: [`WaitingRoom`] and the visitor's calls (enter, status, touch, leave,
//!   complete) and counts.
//! - `admit.rs`: one tick of admission, fenced by the room's lease (see `crate::lease`).
//! - `scripts/room/*.lua`: one script a call, `prelude.lua` first.

mod admit;
mod config;
mod history;
mod waiting_room;

pub use admit::TickReport;
pub use config::RoomConfig;
pub use waiting_room::{RoomCounts, RoomStatus, WaitingRoom};
