//! A topic's flow control as its consumer enforces it: the rate limit its claims keep to, and
//! how many dead letters it keeps, for how long (`delayq-spec`'s [`Flow`]).

pub use delayq_spec::Flow;

/// The rate as claim_due reads it: `<interval µs> <burst>`, or `''` when unlimited.
pub(crate) fn rate_arg(flow: &Flow) -> String {
    match flow.rate {
        Some(r) => format!("{} {}", r.interval_us(), r.burst),
        None => String::new(),
    }
}
