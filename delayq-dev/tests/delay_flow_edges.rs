//! Flow control at its edges, each found by an adversarial review and failing before its fix:
//! a `rate_tat` far ahead (a slower rate before, a hand edit, garbage), an old build's stats
//! cleanup beside a new one, a rate lowered from outside the code under an attribute's burst,
//! sends to a held-back topic, `retry_after(Duration::MAX)`, and the test kit's `advance` on a
//! rate-limited topic.

mod rate_tat {
    include!("flow_edges/rate_tat.rs");
}
mod old_build_stats {
    include!("flow_edges/old_build_stats.rs");
}
mod rate_override {
    include!("flow_edges/rate_override.rs");
}
mod rate_spin {
    include!("flow_edges/rate_spin.rs");
}
mod retry_after_huge {
    include!("flow_edges/retry_after_huge.rs");
}
mod kit_rate {
    include!("flow_edges/kit_rate.rs");
}
