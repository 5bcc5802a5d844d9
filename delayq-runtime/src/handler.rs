//! The handler traits. As in axum, the compiler picks how to call a listener from its type:
//! `Fn(P) -> Fut` is auto ack, `Fn(P, Ack) -> Fut` is manual ack, where `P` is a payload type
//! `T: DeserializeOwned`, or `Message<T>` for a topic and `StreamMessage<T>` for a stream, and
//! `Fut` yields `()` or `Result<T, E: Display>` with `T: Serialize` (a value other than `()`
//! is kept as the message's result, see `results` in delayq-core). Delay and stream listeners share all of it:
//! they differ only in what they are called with (`D`: a `TopicDelivery` or `StreamDelivery`).
//! The mode is a type too ([`AckMode`]), and it alone decides what happens after a run.

use std::any::{Any, TypeId};
use std::fmt::Display;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::ack::Ack;

/// A handler run, boxed: resolves to `Err(text)` when the handler reported a failure.
pub type HandlerFuture = Pin<Box<dyn Future<Output = Result<(), String>> + Send + 'static>>;

/// A listener's run, boxed: resolves to the value to keep (JSON; `None` for a handler that
/// returns none) or the failure the handler reported.
pub type RunFuture = Pin<Box<dyn Future<Output = Result<Kept, Failure>> + Send + 'static>>;

/// The value a run returned, encoded as JSON, to keep as the message's result; `None` when
/// the handler returns none (`()` or `Result<(), E>`).
pub type Kept = Option<Vec<u8>>;

/// How a listener's run failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// An error (its text): retried after the backoff, or dead-lettered on the last attempt.
    Error(String),
    /// Not now ([`RetryAfter`]): back after the delay, the attempt not counted.
    Later(Duration, String),
}

/// A listener's error that says "not now, come back after this": the message is delivered
/// again after the duration without using an attempt (the HTTP 429 case). Return it as the
/// handler's `Err` (`Err(RetryAfter(d))`), or inside a `Box<dyn Error + Send + Sync>` (what
/// `?` makes of it), anywhere in that error's `source()` chain. A stream entry comes back
/// after the duration or `min_idle`, whichever is shorter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryAfter(pub Duration);

impl Display for RetryAfter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "retry after {}",
            delayq_core::config::format_duration(self.0)
        )
    }
}

impl std::error::Error for RetryAfter {}

/// The delay a [`RetryAfter`] in `e` asks for: `e` itself, or a boxed error whose source
/// chain holds one.
fn retry_after_in<E: 'static>(e: &E) -> Option<Duration> {
    let any = e as &dyn Any;
    if let Some(r) = any.downcast_ref::<RetryAfter>() {
        return Some(r.0);
    }
    let mut link: Option<&(dyn std::error::Error + 'static)> =
        if let Some(b) = any.downcast_ref::<Box<dyn std::error::Error + Send + Sync>>() {
            Some(b.as_ref())
        } else if let Some(b) = any.downcast_ref::<Box<dyn std::error::Error>>() {
            Some(b.as_ref())
        } else {
            None
        };
    while let Some(e) = link {
        if let Some(r) = e.downcast_ref::<RetryAfter>() {
            return Some(r.0);
        }
        link = e.source();
    }
    None
}

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

/// What a listener may return: `()` or `Result<T, E>` with `T: Serialize` and `E: Display`.
#[diagnostic::on_unimplemented(
    message = "a #[delay_listener] must return `()` or `Result<T, E>` with `T: Serialize` and `E: Display`, not `{Self}`"
)]
pub trait ListenerReturn: Send + 'static {
    /// The value to keep (JSON; `None` for none), or the failure: its text is kept as the
    /// message's last error.
    ///
    /// # Errors
    /// The handler's error: a [`RetryAfter`] comes back as [`Failure::Later`]; a value that
    /// does not encode as JSON is a failure too.
    fn into_failure(self) -> Result<Kept, Failure>;

    /// Whether a run of this type keeps a value (`Result<T, E>` with `T` other than `()`).
    fn keeps() -> bool
    where
        Self: Sized,
    {
        false
    }

    /// `Err(text)` for a failure (a leader task's run).
    ///
    /// # Errors
    /// The handler's error, as text.
    fn into_result(self) -> Result<(), String>
    where
        Self: Sized,
    {
        self.into_failure().map(|_| ()).map_err(|f| match f {
            Failure::Error(text) | Failure::Later(_, text) => text,
        })
    }
}

impl ListenerReturn for () {
    fn into_failure(self) -> Result<Kept, Failure> {
        Ok(None)
    }
}

impl<T: Serialize + Send + 'static, E: Display + Send + 'static> ListenerReturn for Result<T, E> {
    fn into_failure(self) -> Result<Kept, Failure> {
        match self {
            // `()` keeps nothing and costs nothing (no JSON made).
            Ok(_) if !Self::keeps() => Ok(None),
            Ok(value) => serde_json::to_vec(&value).map(Some).map_err(|e| {
                Failure::Error(format!("the handler's value does not encode as JSON: {e}"))
            }),
            Err(e) => Err(match retry_after_in(&e) {
                Some(after) => Failure::Later(after, e.to_string()),
                None => Failure::Error(e.to_string()),
            }),
        }
    }

    fn keeps() -> bool {
        TypeId::of::<T>() != TypeId::of::<()>()
    }
}

pub use crate::mode::{AckMode, AfterRun, Auto, Manual};

/// Marker for auto-ack handlers `Fn(P) -> Fut`.
pub struct AutoAck<M, P>(PhantomData<fn() -> (M, P)>);
/// Marker for manual-ack handlers `Fn(P, Ack) -> Fut`.
pub struct ManualAck<M, P>(PhantomData<fn() -> (M, P)>);

/// A function that can handle what `D` delivers (a topic's messages or a stream's entries).
/// Implemented for every accepted shape; `Args` is a marker the compiler infers.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a valid listener handler",
    note = "a listener is `async fn(P) -> R` (auto ack), `async fn(P, Ack) -> R` (manual ack) or, for a #[delay_listener], `async fn(P, Dependencies) -> R` (a flow step, auto ack), where P: Deserialize, or Message<T> (#[delay_listener]) or StreamMessage<T> (#[stream_listener]), and R is () or Result<T: Serialize, E: Display>; its future must be Send"
)]
pub trait Handler<D, Args>: Send + Sync + 'static {
    /// How this handler's messages are settled.
    type Mode: AckMode;
    /// Whether its runs keep a value ([`ListenerReturn::keeps`]).
    fn keeps(&self) -> bool;
    /// Decodes the delivery and starts the handler; `Err` is a decode failure.
    ///
    /// # Errors
    /// The decoding error, when the payload is not a `T`: the message is dead-lettered.
    fn call(&self, inbound: &D, ack: Ack) -> Result<RunFuture, String>;
}

impl<D, F, Fut, P, M> Handler<D, AutoAck<M, P>> for F
where
    F: Fn(P) -> Fut + Send + Sync + 'static,
    Fut: Future + Send + 'static,
    Fut::Output: ListenerReturn,
    P: Decode<M, D>,
{
    type Mode = Auto;

    fn keeps(&self) -> bool {
        <Fut::Output as ListenerReturn>::keeps()
    }

    fn call(&self, inbound: &D, _ack: Ack) -> Result<RunFuture, String> {
        let fut = self(P::decode(inbound)?);
        Ok(Box::pin(async move { fut.await.into_failure() }))
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

    fn keeps(&self) -> bool {
        <Fut::Output as ListenerReturn>::keeps()
    }

    fn call(&self, inbound: &D, ack: Ack) -> Result<RunFuture, String> {
        let fut = self(P::decode(inbound)?, ack);
        Ok(Box::pin(async move { fut.await.into_failure() }))
    }
}

/// A handler with its marker erased, as the runtime stores it.
pub trait ErasedHandler<D>: Send + Sync + 'static {
    /// The ack mode's name, for logs.
    fn mode(&self) -> &'static str;
    /// See [`AckMode::after_run`].
    fn after_run(&self, result: Result<Kept, Failure>) -> AfterRun;
    /// See [`Handler::keeps`].
    fn keeps(&self) -> bool;
    /// See [`Handler::call`].
    fn call(&self, inbound: &D, ack: Ack) -> Result<RunFuture, String>;
}

struct Erased<F, Args>(F, PhantomData<fn() -> Args>);

impl<D, F: Handler<D, Args>, Args: 'static> ErasedHandler<D> for Erased<F, Args> {
    fn mode(&self) -> &'static str {
        <F::Mode as AckMode>::NAME
    }

    fn after_run(&self, result: Result<Kept, Failure>) -> AfterRun {
        <F::Mode as AckMode>::after_run(result)
    }

    fn keeps(&self) -> bool {
        self.0.keeps()
    }

    fn call(&self, inbound: &D, ack: Ack) -> Result<RunFuture, String> {
        self.0.call(inbound, ack)
    }
}

/// Erases a listener's marker, for the `erase` function of each system.
pub(crate) fn erased<D: 'static, F: Handler<D, Args>, Args: 'static>(
    f: F,
) -> Arc<dyn ErasedHandler<D>> {
    Arc::new(Erased(f, PhantomData))
}
