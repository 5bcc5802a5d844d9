//! A topic's flow control as its consumer enforces it: the rate limit its claims keep to, and
//! how many dead letters it keeps, for how long (`delayq-spec`'s [`Flow`]).

pub use delayq_spec::Flow;

/// A rate as claim_due reads it: `<interval µs> <burst>`, or `''` when unlimited (the
/// topic's `rate` and its `rate_per_key`).
pub(crate) fn rate_arg(rate: Option<delayq_spec::Rate>) -> String {
    match rate {
        Some(r) => format!("{} {}", r.interval_us(), r.burst),
        None => String::new(),
    }
}
