//! Checks the arguments and the function's shape; produces the typed listener description.

use syn::spanned::Spanned;
use syn::{FnArg, ItemFn, LitStr};

use crate::attr::{int, string, Args, Spec};
pub(crate) use crate::flow::{flow, Flow};
use crate::values::{
    backoff, bounded, duration, lease_length, name, required, Backoff, DEFAULT_ACK_TIMEOUT_MS,
    DEFAULT_BACKOFF, DEFAULT_CONCURRENCY, DEFAULT_MAX_ATTEMPTS, MAX_CONCURRENCY, MAX_MAX_ATTEMPTS,
};

/// A validated delay listener.
pub(crate) struct Listener {
    pub topic: String,
    pub max_attempts: u32,
    pub ack_timeout_ms: u64,
    pub handling: Handling,
    pub flow: Flow,
}

/// The function's shape, checked for any of the attributes (`attr` names it in messages):
/// its parameter types (`params` of them allowed) and its declared return type.
struct Shape {
    types: Vec<syn::Type>,
    return_type: Option<syn::Type>,
}

fn shape(
    function: &ItemFn,
    attr: &str,
    params: std::ops::RangeInclusive<usize>,
    (count, detail): (&str, &str),
) -> syn::Result<Shape> {
    let sig = &function.sig;
    if sig.asyncness.is_none() {
        return Err(syn::Error::new(
            sig.fn_token.span(),
            format!("a #[{attr}] function must be `async fn`"),
        ));
    }
    if !sig.generics.params.is_empty() {
        return Err(syn::Error::new(
            sig.generics.span(),
            format!("a #[{attr}] function cannot be generic"),
        ));
    }
    let mut types = Vec::new();
    for input in &sig.inputs {
        match input {
            FnArg::Receiver(r) => {
                return Err(syn::Error::new(
                    r.span(),
                    format!("a #[{attr}] must be a free function, not a method"),
                ))
            }
            FnArg::Typed(t) => types.push((*t.ty).clone()),
        }
    }
    if !params.contains(&types.len()) {
        let span = match sig.inputs.iter().nth(*params.end()) {
            Some(extra) => extra.span(),
            None => sig.ident.span(),
        };
        return Err(syn::Error::new(
            span,
            format!("a #[{attr}] takes {count}, not {}: {detail}", types.len()),
        ));
    }
    Ok(Shape {
        types,
        return_type: match &sig.output {
            syn::ReturnType::Default => None,
            syn::ReturnType::Type(_, ty) => Some((**ty).clone()),
        },
    })
}

fn payload_then_ack(message: &str) -> String {
    format!("the payload (`T` or `{message}<T>`), then optionally `ack: Ack` for manual ack")
}

/// How a listener's handler is called and settled; the same for delay and stream listeners.
pub(crate) struct Handling {
    pub concurrency: u32,
    pub backoff: Backoff,
    /// The hard limit of a run (ms), if given: the handler is dropped at it and the run fails.
    pub timeout_ms: Option<u64>,
    /// The type of the second parameter, when there is one (checked to be `Ack` by the compiler).
    pub ack_type: Option<syn::Type>,
    /// The declared return type, when there is one (checked by the compiler).
    pub return_type: Option<syn::Type>,
}

pub(crate) fn handling(
    args: &Args,
    function: &ItemFn,
    attr: &str,
    expects: &str,
    default_concurrency: u32,
) -> syn::Result<Handling> {
    let shape = shape(function, attr, 1..=2, ("1 or 2 parameters", expects))?;
    Ok(Handling {
        concurrency: match args.int("concurrency") {
            Some(lit) => bounded(lit, "concurrency", MAX_CONCURRENCY)?,
            None => default_concurrency,
        },
        backoff: match args.str("backoff") {
            Some(lit) => backoff(lit)?,
            None => DEFAULT_BACKOFF,
        },
        timeout_ms: match args.str("timeout") {
            Some(lit) => Some(duration(lit, "timeout")?),
            None => None,
        },
        ack_type: shape.types.get(1).cloned(),
        return_type: shape.return_type,
    })
}

/// The options of `#[delay_listener]`, in the order error messages list them.
pub(crate) const DELAY_OPTIONS: &[Spec] = &[
    string("topic"),
    int("concurrency"),
    int("max_attempts"),
    string("ack_timeout"),
    string("backoff"),
    string("timeout"),
    string("rate"),
    int("burst"),
    string("rate_per_key"),
    int("dead_max"),
    string("dead_ttl"),
    string("result_ttl"),
    int("results_max"),
];

pub(crate) fn listener(args: Args, function: &ItemFn) -> syn::Result<Listener> {
    let topic = name(
        required(
            args.str("topic"),
            "topic",
            "#[delay_listener(topic = \"order.timeout\")]",
        )?,
        "topic",
    )?;
    let handling = handling(
        &args,
        function,
        "delay_listener",
        &format!(
            "{}, or `deps: Dependencies` for a flow step",
            payload_then_ack("Message")
        ),
        DEFAULT_CONCURRENCY,
    )?;
    let (max_attempts, ack_timeout_ms) = attempts_and_lease(&args)?;
    let flow = flow(&args)?;
    Ok(Listener {
        topic,
        max_attempts,
        ack_timeout_ms,
        handling,
        flow,
    })
}

/// `max_attempts` and `ack_timeout` (ms) of a delay-queue listener: `#[delay_listener]`, and
/// `#[scheduled]`, whose ticks are delay-queue messages.
pub(crate) fn attempts_and_lease(args: &Args) -> syn::Result<(u32, u64)> {
    Ok((
        match args.int("max_attempts") {
            Some(lit) => bounded(lit, "max_attempts", MAX_MAX_ATTEMPTS)?,
            None => DEFAULT_MAX_ATTEMPTS,
        },
        match args.str("ack_timeout") {
            Some(lit) => lease_length(lit, "ack_timeout")?,
            None => DEFAULT_ACK_TIMEOUT_MS,
        },
    ))
}

/// The options of `#[stream_listener]`.
pub(crate) const STREAM_OPTIONS: &[Spec] = &[
    string("stream"),
    string("group"),
    string("start"),
    int("concurrency"),
    int("max_deliveries"),
    string("min_idle"),
    int("batch"),
    string("backoff"),
    string("timeout"),
    int("dead_max"),
    string("dead_ttl"),
];

use delayq_spec::defaults::{
    BATCH as DEFAULT_BATCH, LEADER_TTL_MS as DEFAULT_LEADER_TTL_MS, MAX_BATCH,
    MAX_DELIVERIES as DEFAULT_MAX_DELIVERIES, MIN_IDLE_MS as DEFAULT_MIN_IDLE_MS,
    MIN_LEADER_TTL_MS,
};

/// A validated stream listener.
pub(crate) struct StreamListener {
    pub stream: String,
    pub group: String,
    /// A new group reads from the first entry (`start = "0"`), not only new ones (`"$"`).
    pub from_start: bool,
    pub max_deliveries: u32,
    pub min_idle_ms: u64,
    pub batch: u32,
    pub handling: Handling,
    /// Its dead-letter bounds (`rate` is not a stream listener's option).
    pub flow: Flow,
}

pub(crate) fn stream_listener(args: Args, function: &ItemFn) -> syn::Result<StreamListener> {
    let example = "#[stream_listener(stream = \"orders.v1\", group = \"billing\")]";
    let stream = name(required(args.str("stream"), "stream", example)?, "stream")?;
    let group = name(required(args.str("group"), "group", example)?, "group")?;
    let from_start = match args.str("start") {
        None => false,
        Some(lit) => match lit.value().as_str() {
            "$" => false,
            "0" => true,
            _ => {
                return Err(syn::Error::new(
                    lit.span(),
                    "`start` is \"$\" (a new group reads only entries added from now on, the default) or \"0\" (it reads the stream from its first entry)",
                ))
            }
        },
    };
    let handling = handling(
        &args,
        function,
        "stream_listener",
        &payload_then_ack("StreamMessage"),
        DEFAULT_CONCURRENCY,
    )?;
    let flow = flow(&args)?;
    Ok(StreamListener {
        flow,
        stream,
        group,
        from_start,
        max_deliveries: match args.int("max_deliveries") {
            Some(lit) => bounded(lit, "max_deliveries", MAX_MAX_ATTEMPTS)?,
            None => DEFAULT_MAX_DELIVERIES,
        },
        min_idle_ms: match args.str("min_idle") {
            Some(lit) => lease_length(lit, "min_idle")?,
            None => DEFAULT_MIN_IDLE_MS,
        },
        batch: match args.int("batch") {
            Some(lit) => bounded(lit, "batch", MAX_BATCH)?,
            None => DEFAULT_BATCH,
        },
        handling,
    })
}

/// The options of `#[leader_task]`.
pub(crate) const LEADER_OPTIONS: &[Spec] = &[string("name"), string("every"), string("ttl")];

/// A validated leader task.
pub(crate) struct LeaderTask {
    pub name: String,
    pub every_ms: u64,
    pub ttl_ms: u64,
    /// The type of the parameter (checked to be `Leadership` by the compiler).
    pub param_type: syn::Type,
    pub return_type: Option<syn::Type>,
}

pub(crate) fn leader_task(args: Args, function: &ItemFn) -> syn::Result<LeaderTask> {
    let example = "#[leader_task(name = \"rollup\", every = \"10s\")]";
    let name = name(
        required(args.str("name"), "name", example)?,
        "leader task name",
    )?;
    let every_ms = duration(required(args.str("every"), "every", example)?, "every")?;
    let shape = shape(
        function,
        "leader_task",
        1..=1,
        ("1 parameter", "`leader: Leadership`"),
    )?;
    Ok(LeaderTask {
        name,
        every_ms,
        ttl_ms: match args.str("ttl") {
            Some(lit) => leader_ttl(lit)?,
            None => DEFAULT_LEADER_TTL_MS,
        },
        param_type: shape.types[0].clone(),
        return_type: shape.return_type,
    })
}

fn leader_ttl(lit: &LitStr) -> syn::Result<u64> {
    let ms = duration(lit, "ttl")?;
    if ms < MIN_LEADER_TTL_MS {
        return Err(syn::Error::new(
            lit.span(),
            format!("ttl must be at least {MIN_LEADER_TTL_MS}ms: the lease is renewed every third of it"),
        ));
    }
    Ok(ms)
}
