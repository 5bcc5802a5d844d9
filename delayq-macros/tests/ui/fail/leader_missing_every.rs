use delayq_runtime::{leader_task, Leadership};

#[leader_task(name = "rollup")]
async fn rollup(leader: Leadership) {
    let _ = leader;
}

fn main() {}
