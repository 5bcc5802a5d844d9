//! `#[delay_listener]`: registers an `async fn` as the handler of a delayq topic. Use it
//! through `delayq_runtime`, which re-exports it; its documentation is on
//! [`macro@delay_listener`].
//!
//! The crate follows tracing-attributes' shape: `attr.rs` parses the arguments into a typed
//! struct, `validate.rs` checks them and the function, `expand.rs` generates the registration.

mod attr;
mod expand;
mod validate;

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
/// not one or two parameters, and a second parameter that is not `Ack`.
#[proc_macro_attribute]
pub fn delay_listener(args: TokenStream, item: TokenStream) -> TokenStream {
    let function = syn::parse_macro_input!(item as syn::ItemFn);
    let result = attr::ListenerArgs::parse(args.into())
        .and_then(|args| validate::listener(args, &function))
        .map(|listener| expand::registration(&listener, &function));
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
