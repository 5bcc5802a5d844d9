//! What the commands and the dashboard show, in the two forms they show it: JSON values
//! (`--json` and the dashboard's API share them) and table rows (`views.rs`), over the forms
//! they share (`text.rs`).

mod flow;
mod found;
mod history;
mod text;
mod views;

pub(crate) use flow::{flow_json, flow_tree};
pub(crate) use found::{found_detail, found_json, not_found};
pub(crate) use history::{history_json, history_text, Kind};
pub(crate) use text::{error_row, printable, printable_lines, table};
pub(crate) use views::{
    dead_detail, dead_json, dead_row, pending_json, pending_row, room_json, room_row,
    schedule_json, schedule_row, stats_json, stats_row, stream_json, stream_rows, DEAD_HEADER,
    PEEK_HEADER, ROOMS_HEADER, SCHEDULES_HEADER, STATS_HEADER, STREAMS_HEADER,
};
