use delayq_runtime::delay_listener;

struct S;

impl S {
    #[delay_listener(topic = "t")]
    async fn handler(&self, _: u32) {}
}

fn main() {}
