//! The handler traits. As in axum, the compiler picks how to call a listener from its type:
//! `Fn(P) -> Fut` is auto ack, `Fn(P, Ack) -> Fut` is manual ack, where `P` is a payload type
//! `T: DeserializeOwned`, or `Message<T>` for a topic and `StreamMessage<T>` for a stream, and
//! `Fut` yields `()` or `Result<(), E: Display>`. Delay and stream listeners share all of it:
//! they differ only in what they are called with (`D`: a `TopicDelivery` or `StreamDelivery`).
//! The mode is a type too ([`AckMode`]), and it alone decides what happens after a run.

use std::fmt::Display;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;

use serde::de::DeserializeOwned;

use crate::ack::Ack;

/// A handler run, boxed: resolves to `Err(text)` when the handler reported a failure.
pub type HandlerFuture = Pin<Box<dyn Future<Output = Result<(), String>> + Send + 'static>>;

/// What a handler is called with: a topic's claimed message or a stream's entry.
pub trait Inbound: Send + Sync + 'static {
    /// The raw JSON payload, or why there is none.
    ///
    /// # Errors
    /// Why there is no payload (a stream entry without the `payload` field).
    fn payload(&self) -> Result<&[u8], String>;
}

/// A first parameter a listener can take from `D`. `M` only tells the impls apart.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be the payload parameter of this listener",
    note = "take a type that implements serde::Deserialize, or Message<T> of one (#[delay_listener]) or StreamMessage<T> of one (#[stream_listener])"
)]
pub trait Decode<M, D>: Sized + Send + 'static {
    /// Decodes the payload of `inbound`; the error text becomes the dead-letter reason.
    ///
    /// # Errors
    /// The decoding error's text.
    fn decode(inbound: &D) -> Result<Self, String>;
}

/// Marker: the parameter is the payload itself.
pub enum ViaPayload {}
/// Marker: the parameter is `Message<T>` or `StreamMessage<T>`.
pub enum ViaMessage {}

pub(crate) fn payload<T: DeserializeOwned, D: Inbound>(inbound: &D) -> Result<T, String> {
    serde_json::from_slice(inbound.payload()?).map_err(|e| {
        format!(
            "payload does not decode into {}: {e}",
            std::any::type_name::<T>()
        )
    })
}

impl<T: DeserializeOwned + Send + 'static, D: Inbound> Decode<ViaPayload, D> for T {
    fn decode(inbound: &D) -> Result<Self, String> {
        payload(inbound)
    }
}

/// What a listener may return: `()` or `Result<(), E>` with `E: Display`.
#[diagnostic::on_unimplemented(
    message = "a #[delay_listener] must return `()` or `Result<(), E>` with `E: Display`, not `{Self}`"
)]
pub trait ListenerReturn: Send + 'static {
    /// `Err(text)` for a failure, kept as the message's last error.
    ///
    /// # Errors
    /// The handler's error, as text (kept on the message).
    fn into_result(self) -> Result<(), String>;
}

impl ListenerReturn for () {
    fn into_result(self) -> Result<(), String> {
        Ok(())
    }
}

impl<E: Display + Send + 'static> ListenerReturn for Result<(), E> {
    fn into_result(self) -> Result<(), String> {
        self.map_err(|e| e.to_string())
    }
}

/// What the runtime does once a handler run has returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AfterRun {
    /// Ack the message.
    Ack,
    /// Retry it after the backoff (or dead-letter it on its last attempt), keeping the error.
    Retry(String),
    /// Leave it to the `Ack` handle: the ack deadline counts from now.
    AwaitAck,
}

/// How a listener's messages are settled; the handler's shape picks the mode.
pub trait AckMode: 'static {
    /// The mode's name, for logs.
    const NAME: &'static str;
    /// What to do once a run returned `result` (and did not settle the message itself).
    fn after_run(result: Result<(), String>) -> AfterRun;
}

/// Auto ack: `Ok` acks, `Err` retries.
pub enum Auto {}
/// Manual ack: the handler's `Ack` settles; `Err` retries, `Ok` without an ack waits for one.
pub enum Manual {}

impl AckMode for Auto {
    const NAME: &'static str = "auto";
    fn after_run(result: Result<(), String>) -> AfterRun {
        match result {
            Ok(()) => AfterRun::Ack,
            Err(error) => AfterRun::Retry(error),
        }
    }
}

impl AckMode for Manual {
    const NAME: &'static str = "manual";
    fn after_run(result: Result<(), String>) -> AfterRun {
        match result {
            Ok(()) => AfterRun::AwaitAck,
            Err(error) => AfterRun::Retry(error),
        }
    }
}

/// Marker for auto-ack handlers `Fn(P) -> Fut`.
pub struct AutoAck<M, P>(PhantomData<fn() -> (M, P)>);
/// Marker for manual-ack handlers `Fn(P, Ack) -> Fut`.
pub struct ManualAck<M, P>(PhantomData<fn() -> (M, P)>);

/// A function that can handle what `D` delivers (a topic's messages or a stream's entries).
/// Implemented for every accepted shape; `Args` is a marker the compiler infers.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a valid listener handler",
    note = "a listener is `async fn(P) -> R` (auto ack) or `async fn(P, Ack) -> R` (manual ack), where P: Deserialize, or Message<T> (#[delay_listener]) or StreamMessage<T> (#[stream_listener]), and R is () or Result<(), E: Display>; its future must be Send"
)]
pub trait Handler<D, Args>: Send + Sync + 'static {
    /// How this handler's messages are settled.
    type Mode: AckMode;
    /// Decodes the delivery and starts the handler; `Err` is a decode failure.
    ///
    /// # Errors
    /// The decoding error, when the payload is not a `T`: the message is dead-lettered.
    fn call(&self, inbound: &D, ack: Ack) -> Result<HandlerFuture, String>;
}

impl<D, F, Fut, P, M> Handler<D, AutoAck<M, P>> for F
where
    F: Fn(P) -> Fut + Send + Sync + 'static,
    Fut: Future + Send + 'static,
    Fut::Output: ListenerReturn,
    P: Decode<M, D>,
{
    type Mode = Auto;

    fn call(&self, inbound: &D, _ack: Ack) -> Result<HandlerFuture, String> {
        let fut = self(P::decode(inbound)?);
        Ok(Box::pin(async move { fut.await.into_result() }))
    }
}

impl<D, F, Fut, P, M> Handler<D, ManualAck<M, P>> for F
where
    F: Fn(P, Ack) -> Fut + Send + Sync + 'static,
    Fut: Future + Send + 'static,
    Fut::Output: ListenerReturn,
    P: Decode<M, D>,
{
    type Mode = Manual;

    fn call(&self, inbound: &D, ack: Ack) -> Result<HandlerFuture, String> {
        let fut = self(P::decode(inbound)?, ack);
        Ok(Box::pin(async move { fut.await.into_result() }))
    }
}

/// A handler with its marker erased, as the runtime stores it.
pub trait ErasedHandler<D>: Send + Sync + 'static {
    /// The ack mode's name, for logs.
    fn mode(&self) -> &'static str;
    /// See [`AckMode::after_run`].
    fn after_run(&self, result: Result<(), String>) -> AfterRun;
    /// See [`Handler::call`].
    fn call(&self, inbound: &D, ack: Ack) -> Result<HandlerFuture, String>;
}

struct Erased<F, Args>(F, PhantomData<fn() -> Args>);

impl<D, F: Handler<D, Args>, Args: 'static> ErasedHandler<D> for Erased<F, Args> {
    fn mode(&self) -> &'static str {
        <F::Mode as AckMode>::NAME
    }

    fn after_run(&self, result: Result<(), String>) -> AfterRun {
        <F::Mode as AckMode>::after_run(result)
    }

    fn call(&self, inbound: &D, ack: Ack) -> Result<HandlerFuture, String> {
        self.0.call(inbound, ack)
    }
}

/// Erases a listener's marker, for the `erase` function of each system.
pub(crate) fn erased<D: 'static, F: Handler<D, Args>, Args: 'static>(
    f: F,
) -> Arc<dyn ErasedHandler<D>> {
    Arc::new(Erased(f, PhantomData))
}
