//! The payload the benchmarks send: a 92-byte JSON object, the size BENCHMARKS.md reports.

use serde::{Deserialize, Serialize};

/// An order-timeout message.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Payload {
    /// The order.
    pub order_id: u64,
    /// Its customer.
    pub customer: String,
    /// A note.
    pub note: String,
}

/// The `i`th payload.
pub fn payload(i: u64) -> Payload {
    Payload {
        order_id: i,
        customer: format!("customer-{:08}", i % 100_000),
        note: "close the order if it is still unpaid".to_string(),
    }
}
