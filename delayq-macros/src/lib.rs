//! `#[delay_listener]`, `#[stream_listener]`, `#[leader_task]` and `#[scheduled]`: register an `async fn` with
//! the delayq runtime. Use them through `delayq_runtime`, which re-exports them; their
//! documentation is on each attribute.
#![deny(missing_docs)]
//!
//! The crate follows tracing-attributes' shape: `attr.rs` parses the arguments into a typed
//! table, `validate.rs` checks them and the function, `expand.rs` generates the registration.
//! The attributes share all three steps; each has its option list and its checks
//! (`values.rs` the option values; `schedule.rs` what only `#[scheduled]` checks and emits).

mod attr;
mod expand;
mod flow;
mod schedule;
mod validate;
mod values;

use proc_macro::TokenStream;

/// Registers an `async fn` as the listener of a delayq topic; `delayq_runtime::start()` runs
/// every listener linked into the binary.
///
/// ```
/// use delayq_runtime::{delay_listener, Ack, Message};
/// use serde::Deserialize;
///
/// #[derive(Deserialize)]
/// struct OrderTimeout { order_id: u64 }
///
/// // Auto ack (one parameter): Ok(()) or () acks; Err(_) or a panic retries with backoff,
/// // and after max_attempts the message goes to the topic's dead letters.
/// #[delay_listener(topic = "order.timeout")]
/// async fn close_order(msg: OrderTimeout) -> Result<(), String> {
///     println!("closing order {}", msg.order_id);
///     Ok(())
/// }
///
/// // Manual ack (a second parameter of type `Ack`): nothing is acked until `ack.ack()`.
/// #[delay_listener(topic = "order.remind", concurrency = 8, max_attempts = 5, ack_timeout = "30s")]
/// async fn remind(msg: Message<OrderTimeout>, ack: Ack) {
///     println!("attempt {} of {}", msg.attempt(), msg.id());
///     ack.ack().await.expect("ack");
/// }
///
/// // Every option, with a fixed retry delay.
/// #[delay_listener(
///     topic = "billing.retry",
///     concurrency = 4,
///     max_attempts = 3,
///     ack_timeout = "2m",
///     backoff = "fixed(5s)"
/// )]
/// async fn charge(order_id: u64) -> Result<(), String> {
///     Err(format!("card declined for order {order_id}"))
/// }
/// # fn main() {}
/// ```
///
/// # Options
///
/// | option | default | meaning |
/// |---|---|---|
/// | `topic` (required) | — | 1 to 128 characters from `A-Z a-z 0-9 . _ : -` |
/// | `concurrency` | `16` | handlers running at once in this process (1 to 10,000) |
/// | `max_attempts` | `16` | handler runs in all, counting the first (1 to 1,000,000) |
/// | `ack_timeout` | `"30s"` | lease of a running auto-ack handler, renewed while it runs; for manual ack, the time to ack after the handler returns. Units `ms`, `s`, `m`, `h`; at least `100ms` |
/// | `backoff` | `"exp(1s, 10m)"` | the wait before a retry: `"exp(base, cap)"` doubles from `base` up to `cap` with jitter; `"fixed(5s)"` waits the same each time |
///
/// # Handler shapes
///
/// - First parameter: the payload, any `T: serde::Deserialize`, or `Message<T>` for the payload
///   with its id, attempt and times. A payload that does not decode is dead-lettered at once.
/// - Second parameter, optional: `Ack`. The compiler picks the ack mode from the function's
///   type (so an alias or re-export of `Ack` works).
/// - Return type: `()` or `Result<(), E>` with `E: Display` (the error text is kept on the
///   message). The future must be `Send`.
///
/// Rejected at compile time, with the error on the offending token: a missing or invalid
/// topic, an unknown or repeated option, a value of the wrong kind or out of range, a
/// malformed duration or backoff, a function that is not `async`, generic, a method, or has
/// not one or two parameters, and a second parameter that is not `Ack` or `Dependencies` (a
/// flow step's: what the steps it waited for returned, the listener acking automatically).
#[proc_macro_attribute]
pub fn delay_listener(args: TokenStream, item: TokenStream) -> TokenStream {
    let function = syn::parse_macro_input!(item as syn::ItemFn);
    let result = attr::Args::parse(args.into(), validate::DELAY_OPTIONS)
        .and_then(|args| {
            let given = args.given();
            validate::listener(args, &function).map(|v| (v, given))
        })
        .map(|(listener, given)| expand::registration(&listener, &function, &given));
    emit(result, &function)
}

/// Registers an `async fn` as the consumer of a Redis Streams consumer group;
/// `delayq_runtime::start()` runs it with the delay listeners.
///
/// ```
/// use delayq_runtime::{stream_listener, Ack, StreamMessage};
/// use serde::Deserialize;
///
/// #[derive(Deserialize)]
/// struct OrderPlaced { order_id: u64 }
///
/// // Auto ack: Ok(()) acks (XACK); Err(_) or a panic delivers the entry again after the
/// // backoff, and after max_deliveries it goes to the dead-letter stream {orders.v1}:dead.
/// #[stream_listener(stream = "orders.v1", group = "billing")]
/// async fn bill(event: OrderPlaced) -> Result<(), String> {
///     println!("billing order {}", event.order_id);
///     Ok(())
/// }
///
/// // Manual ack, with every option.
/// #[stream_listener(
///     stream = "orders.v1",
///     group = "audit",
///     start = "0",
///     concurrency = 8,
///     max_deliveries = 5,
///     min_idle = "30s",
///     batch = 50,
///     backoff = "fixed(2s)"
/// )]
/// async fn audit(msg: StreamMessage<OrderPlaced>, ack: Ack) {
///     println!("entry {} delivered {} times", msg.id(), msg.deliveries());
///     ack.ack().await.expect("ack");
/// }
/// # fn main() {}
/// ```
///
/// # Options
///
/// | option | default | meaning |
/// |---|---|---|
/// | `stream` (required) | — | the stream's Redis key as other services write it (not namespaced); the topic rule: 1 to 128 characters from `A-Z a-z 0-9 . _ : -` |
/// | `group` (required) | — | the consumer group, created at start if missing (`MKSTREAM`); same rule |
/// | `start` | `"$"` | where a new group starts: `"$"` only entries added from now on, `"0"` the whole stream |
/// | `concurrency` | `16` | handlers running at once in this process (1 to 10,000) |
/// | `max_deliveries` | `16` | deliveries of one entry to the group before it is dead-lettered (1 to 1,000,000) |
/// | `min_idle` | `"60s"` | an entry pending this long without its consumer renewing it is taken over by another consumer; running handlers renew it every third of it. At least `100ms` |
/// | `batch` | `100` | the most entries one read asks for (1 to 10,000); never more than free handler slots |
/// | `backoff` | `"exp(1s, 10m)"` | the wait before an entry whose handler failed is delivered again, capped by `min_idle` |
///
/// Handler shapes and compile-time checks are those of [`macro@delay_listener`], with
/// `StreamMessage<T>` in place of `Message<T>`.
#[proc_macro_attribute]
pub fn stream_listener(args: TokenStream, item: TokenStream) -> TokenStream {
    let function = syn::parse_macro_input!(item as syn::ItemFn);
    let result = attr::Args::parse(args.into(), validate::STREAM_OPTIONS)
        .and_then(|args| {
            let given = args.given();
            validate::stream_listener(args, &function).map(|v| (v, given))
        })
        .map(|(listener, given)| expand::stream_registration(&listener, &function, &given));
    emit(result, &function)
}

/// Registers an `async fn` that runs every `every` on exactly one process of the namespace
/// at a time, under a Redis lease; `delayq_runtime::start()` runs it.
///
/// ```
/// use delayq_runtime::{leader_task, Leadership};
///
/// #[leader_task(name = "rollup", every = "10s")]
/// async fn rollup(leader: Leadership) -> Result<(), String> {
///     // Hand the fencing token to what you write, so a stale leader's writes can be refused.
///     println!("rolling up as leader {}", leader.token());
///     Ok(())
/// }
///
/// #[leader_task(name = "cleanup", every = "1m", ttl = "30s")]
/// async fn cleanup(leader: Leadership) {
///     if leader.is_current().await { /* ... */ }
/// }
/// # fn main() {}
/// ```
///
/// # Options
///
/// | option | default | meaning |
/// |---|---|---|
/// | `name` (required) | — | the lease's name in the namespace; the topic rule |
/// | `every` (required) | — | how often the leader runs the task (from the start of one run to the next; a run never overlaps the previous one) |
/// | `ttl` | `"15s"` | the lease: renewed every third of it; when the leader dies, another takes over within it. At least `300ms` |
///
/// The function takes one parameter, `Leadership` (its fencing token and `is_current()`),
/// and returns `()` or `Result<(), E: Display>` (an error is logged; the next run comes all
/// the same).
///
/// # One leader at a time, and where that ends
///
/// A run starts only on a lease confirmed within its ttl, counted from when the confirming
/// request was *sent* (less a tenth of the ttl for late timers): a reply that arrives late
/// proves nothing. When the lease is known lost, or cannot be confirmed again before that
/// count runs out, the running body is dropped at its next `.await`, before Redis could let
/// another process take the lease. What this cannot stop is a body that does not reach an
/// `.await` (a long computation, blocking I/O) or a write already on its way over the
/// network: such a write can land after another leader started. Fence those: pass
/// `leader.token()` to the store and let it refuse a token lower than one it has seen, or
/// check `leader.is_current().await` right before an effect (it asks Redis; a `true` means the
/// lease was held when Redis answered, not when the reply arrived).
#[proc_macro_attribute]
pub fn leader_task(args: TokenStream, item: TokenStream) -> TokenStream {
    let function = syn::parse_macro_input!(item as syn::ItemFn);
    let result = attr::Args::parse(args.into(), validate::LEADER_OPTIONS)
        .and_then(|args| {
            let given = args.given();
            validate::leader_task(args, &function).map(|v| (v, given))
        })
        .map(|(task, given)| expand::leader_registration(&task, &function, &given));
    emit(result, &function)
}

/// Runs an `async fn` at every tick of a schedule: a cron pattern in a time zone, or a fixed
/// interval. Each tick is one delay-queue message, produced once however many processes run
/// the fn, and delivered at its time; it retries and dead-letters like any message. The next
/// tick's time is kept in Redis, so a restart neither loses nor repeats one.
///
/// ```
/// use delayq_runtime::{scheduled, Ack, Tick};
///
/// // Every weekday at 09:00 in Berlin, once across all processes.
/// #[scheduled(name = "daily-report", cron = "0 9 * * MON-FRI", tz = "Europe/Berlin")]
/// async fn daily_report(tick: Tick) -> Result<(), String> {
///     println!("report for {:?} ({} missed before it)", tick.scheduled_at(), tick.missed());
///     Ok(())
/// }
///
/// #[scheduled(name = "sweep", every = "5m", catch_up = "none", max_attempts = 3)]
/// async fn sweep(tick: Tick, ack: Ack) {
///     ack.ack().await.unwrap();
/// }
/// # fn main() {}
/// ```
///
/// # Options
///
/// | option | default | meaning |
/// |---|---|---|
/// | `name` (required) | — | the schedule's name, and the topic its ticks run on; the topic rule |
/// | `cron` or `every` (one of them) | — | a cron pattern (5 fields, or 6 with seconds first; `MON`–`SUN`, `JAN`–`DEC`, `@hourly`, `@daily`, `@weekly`, `@monthly`, `@yearly`), or an interval (`"100ms"`, `"5m"`; at least 10 ms; the first tick one interval after the schedule is first created) |
/// | `tz` | `"UTC"` | the IANA time zone of a cron pattern. A local time that does not exist (spring forward) runs once at the first instant after the gap; one that occurs twice (fall back) runs once, at its first occurrence |
/// | `catch_up` | `"last"` | ticks missed while no process ran: `"last"` runs the latest once, `"none"` skips them, `"all"` runs each (at most 100, oldest first) |
/// | `misfire_after` | `"60s"` | how late (by Redis' clock) a tick may be produced and still run as on time; a later one is missed and `catch_up` decides (Quartz's misfire threshold; at least 100 ms) |
/// | `concurrency` | `1` | ticks of this schedule that may run at once |
/// | `max_attempts`, `ack_timeout`, `backoff` | as `#[delay_listener]` | retries of a failed tick |
///
/// The function takes `tick: Tick` (`name()`, `scheduled_at()`, `attempt()`, `missed()`),
/// and optionally `ack: Ack` for manual ack; it returns `()` or `Result<(), E: Display>`.
/// The pattern and time zone are checked at compile time.
#[proc_macro_attribute]
pub fn scheduled(args: TokenStream, item: TokenStream) -> TokenStream {
    let function = syn::parse_macro_input!(item as syn::ItemFn);
    let result = attr::Args::parse(args.into(), schedule::SCHEDULE_OPTIONS)
        .and_then(|args| {
            let given = args.given();
            schedule::scheduled(args, &function).map(|v| (v, given))
        })
        .map(|(s, given)| schedule::registration(&s, &function, &given));
    emit(result, &function)
}

fn emit(result: syn::Result<proc_macro2::TokenStream>, function: &syn::ItemFn) -> TokenStream {
    match result {
        Ok(tokens) => tokens.into(),
        Err(err) => {
            // Keep the function so that one mistake does not cascade into unresolved names.
            let mut out = err.to_compile_error();
            out.extend(quote::quote!(#function));
            out.into()
        }
    }
}
