//! Idle listeners for the idle-cost test and benchmark.

/// Declares idle listeners (`async fn name(_: u32) {}`, one per topic) and a `const` slice of
/// their topics, for the idle-cost test and benchmark:
/// `delayq_dev::idle_listeners!(IDLE_TOPICS: a = "t.a", b = "t.b");`
#[macro_export]
macro_rules! idle_listeners {
    ($topics:ident: $($name:ident = $topic:literal),* $(,)?) => {
        $(#[::delayq_runtime::delay_listener(topic = $topic)]
        async fn $name(_: u32) {})*
        const $topics: &[&str] = &[$($topic),*];
    };
}
