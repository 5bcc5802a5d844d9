//! `#[delay_listener]`: registers an `async fn` as the handler of a delayq topic.
//!
//! Use it through `delayq_runtime`, which re-exports it:
//!
//! ```ignore
//! use delayq_runtime::{delay_listener, Ack, Message};
//!
//! // Auto ack: Ok(()) (or `()`) acks; Err(_) or a panic retries with backoff.
//! #[delay_listener(topic = "order.timeout")]
//! async fn close_order(msg: OrderTimeout) -> Result<(), MyError> { Ok(()) }
//!
//! // Manual ack: a second parameter of type `Ack`.
//! #[delay_listener(topic = "order.remind", concurrency = 8, max_attempts = 5, ack_timeout = "30s")]
//! async fn remind(msg: Message<OrderTimeout>, ack: Ack) { ack.ack().await.expect("ack"); }
//! ```
//!
//! # Options
//!
//! | option | default | example |
//! |---|---|---|
//! | `topic` (required) | — | `topic = "order.timeout"`: 1 to 128 of `A-Z a-z 0-9 . _ : -` |
//! | `concurrency` | 16 | `concurrency = 8`: handlers running at once in this process (1 to 10,000) |
//! | `max_attempts` | 16 | `max_attempts = 5`: handler runs in all, counting the first |
//! | `ack_timeout` | `"30s"` | `ack_timeout = "500ms"`; units `ms`, `s`, `m`, `h` |
//! | `backoff` | `"exp(1s, 10m)"` | `backoff = "fixed(5s)"`: the wait before a retry |
//!
//! The macro checks the attribute and the function's shape (async, one or two parameters, the
//! second of type `Ack`). Which ack mode a listener uses is decided by the compiler, from the
//! handler traits `delayq_runtime` implements for each accepted function shape.

mod attr;
mod expand;
mod validate;

use proc_macro::TokenStream;

/// Registers an `async fn` as the listener of a topic. See the crate docs for the options.
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
