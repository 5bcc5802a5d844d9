//! A consumer process for tests that need a real process: it runs `delayq_runtime::start()`
//! (environment config, signal handling) with listeners that record what they handle.
//!
//! Each handled message appends the line `<payload> <attempt> <pid>` to the file named by
//! `DELAYQ_TEST_LEDGER`, after sleeping `DELAYQ_TEST_HANDLER_MS` (default 0) milliseconds.
//! Listeners: `proc.work` (ack_timeout 5 s), `proc.slow` (ack_timeout 1 s), `proc.rated`
//! (`rate = "1000/s"`, which tests lower with `DELAYQ_LISTENER_PROC_RATED_RATE`) and
//! `proc.perkey` (`rate_per_key = "20/s"`).

use delayq_runtime::{delay_listener, Message};

async fn handle(msg: Message<u64>) -> Result<(), String> {
    tokio::time::sleep(delayq_dev::handler_delay()).await;
    delayq_dev::append_to_ledger(
        &delayq_dev::LedgerLine {
            payload: *msg.payload(),
            attempt: msg.attempt(),
            pid: std::process::id(),
            at_us: delayq_dev::epoch_us(),
        }
        .format(),
    )
}

#[delay_listener(topic = "proc.work", concurrency = 32, ack_timeout = "5s")]
async fn work(msg: Message<u64>) -> Result<(), String> {
    handle(msg).await
}

#[delay_listener(topic = "proc.slow", concurrency = 4, ack_timeout = "1s")]
async fn slow(msg: Message<u64>) -> Result<(), String> {
    handle(msg).await
}

#[delay_listener(topic = "proc.rated", concurrency = 32, rate = "1000/s")]
async fn rated(msg: Message<u64>) -> Result<(), String> {
    handle(msg).await
}

#[delay_listener(topic = "proc.perkey", concurrency = 32, rate_per_key = "20/s")]
async fn per_key(msg: Message<u64>) -> Result<(), String> {
    handle(msg).await
}

#[tokio::main]
async fn main() {
    delayq_dev::init_process_tracing();
    if let Err(e) = delayq_runtime::start().await {
        eprintln!("delayq-test-consumer: {e}");
        std::process::exit(1);
    }
}
