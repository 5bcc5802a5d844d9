use delayq_runtime::leader_task;

#[leader_task(name = "rollup", every = "10s")]
async fn rollup(token: u64) {
    let _ = token;
}

fn main() {}
