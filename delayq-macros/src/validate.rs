//! Checks the arguments and the function's shape; produces the typed listener description.

use syn::spanned::Spanned;
use syn::{FnArg, ItemFn, LitStr};

use crate::attr::{attribute_span, int, string, Args, Spec};

/// The shortest `ack_timeout` a listener may have. The runtime renews a running handler's
/// lease every third of it, so the lease must outlast about three Redis round trips plus the
/// scheduler's jitter; below 100 ms a single slow round trip or a busy executor would let the
/// lease lapse and the message be delivered twice while its handler still runs.
pub(crate) const MIN_ACK_TIMEOUT_MS: u64 = 100;

/// Defaults and limits of the options (documented in lib.rs and API.md).
pub(crate) const DEFAULT_CONCURRENCY: u32 = 16;
pub(crate) const MAX_CONCURRENCY: u32 = 10_000;
pub(crate) const DEFAULT_MAX_ATTEMPTS: u32 = 16;
pub(crate) const MAX_MAX_ATTEMPTS: u32 = 1_000_000;
pub(crate) const DEFAULT_ACK_TIMEOUT_MS: u64 = 30_000;
/// `exp(1s, 10m)`.
pub(crate) const DEFAULT_BACKOFF: Backoff = Backoff::Exponential {
    base_ms: 1_000,
    max_ms: 600_000,
};
/// Topic names: the same rule as `delayq_core`'s `validate_topic` (keys.rs), which checks
/// names given at run time; a proc-macro crate cannot call it, so each cites the other.
const MAX_TOPIC_LEN: usize = 128;

/// A retry delay policy, in milliseconds.
pub(crate) enum Backoff {
    Exponential { base_ms: u64, max_ms: u64 },
    Fixed { ms: u64 },
}

/// A validated delay listener.
pub(crate) struct Listener {
    pub topic: String,
    pub max_attempts: u32,
    pub ack_timeout_ms: u64,
    pub handling: Handling,
}

/// A topic, stream, group or leader-task name (`what`): the topic rule.
fn name(lit: &LitStr, what: &str) -> syn::Result<String> {
    let name = lit.value();
    let ok_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-');
    if name.is_empty() || name.len() > MAX_TOPIC_LEN || !name.chars().all(ok_char) {
        return Err(syn::Error::new(
            lit.span(),
            format!("invalid {what}: use 1 to 128 characters from A-Z a-z 0-9 . _ : -"),
        ));
    }
    Ok(name)
}

fn required<'a>(lit: Option<&'a LitStr>, what: &str, example: &str) -> syn::Result<&'a LitStr> {
    lit.ok_or_else(|| syn::Error::new(attribute_span(), format!("missing {what}: write {example}")))
}

/// Parses a humane duration: a whole number followed by `ms`, `s`, `m` or `h`.
pub(crate) fn duration_ms(text: &str) -> Option<u64> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit())?;
    let (number, unit) = text.split_at(split);
    let n: u64 = number.parse().ok()?;
    let factor = match unit.trim() {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        _ => return None,
    };
    n.checked_mul(factor).filter(|ms| *ms > 0)
}

fn duration(lit: &LitStr, what: &str) -> syn::Result<u64> {
    duration_ms(&lit.value()).ok_or_else(|| {
        syn::Error::new(
            lit.span(),
            format!("malformed {what}: expected a positive whole number with a unit ms, s, m or h, like \"30s\" or \"500ms\""),
        )
    })
}

/// A duration that must be at least [`MIN_ACK_TIMEOUT_MS`]: a lease renewed every third of it.
fn lease_length(lit: &LitStr, what: &str) -> syn::Result<u64> {
    let ms = duration(lit, what)?;
    if ms < MIN_ACK_TIMEOUT_MS {
        return Err(syn::Error::new(
            lit.span(),
            format!("{what} must be at least {MIN_ACK_TIMEOUT_MS}ms: the lease is renewed every third of it, and a shorter one lapses on a single slow Redis round trip"),
        ));
    }
    Ok(ms)
}

fn backoff(lit: &LitStr) -> syn::Result<Backoff> {
    let text = lit.value();
    let text = text.trim();
    let bad = || {
        syn::Error::new(
            lit.span(),
            "malformed backoff: expected \"exp(<base>, <max>)\" or \"fixed(<delay>)\", like \"exp(1s, 10m)\" or \"fixed(5s)\"",
        )
    };
    if let Some(inner) = text.strip_prefix("exp(").and_then(|t| t.strip_suffix(')')) {
        let (base, max) = inner.split_once(',').ok_or_else(bad)?;
        let base_ms = duration_ms(base).ok_or_else(bad)?;
        let max_ms = duration_ms(max).ok_or_else(bad)?;
        if max_ms < base_ms {
            return Err(syn::Error::new(
                lit.span(),
                "backoff: the cap must not be below the base",
            ));
        }
        return Ok(Backoff::Exponential { base_ms, max_ms });
    }
    if let Some(inner) = text
        .strip_prefix("fixed(")
        .and_then(|t| t.strip_suffix(')'))
    {
        return Ok(Backoff::Fixed {
            ms: duration_ms(inner).ok_or_else(bad)?,
        });
    }
    Err(bad())
}

fn bounded(lit: &syn::LitInt, name: &str, max: u32) -> syn::Result<u32> {
    match lit.base10_parse::<u32>() {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ => Err(syn::Error::new(
            lit.span(),
            format!("`{name}` must be between 1 and {max}"),
        )),
    }
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

/// How a listener's handler is called and settled; the same for delay and stream listeners.
pub(crate) struct Handling {
    pub concurrency: u32,
    pub backoff: Backoff,
    /// The type of the second parameter, when there is one (checked to be `Ack` by the compiler).
    pub ack_type: Option<syn::Type>,
    /// The declared return type, when there is one (checked by the compiler).
    pub return_type: Option<syn::Type>,
}

fn handling(args: &Args, function: &ItemFn, attr: &str, payload: &str) -> syn::Result<Handling> {
    let shape = shape(
        function,
        attr,
        1..=2,
        (
            "1 or 2 parameters",
            &format!(
                "the payload (`T` or `{payload}<T>`), then optionally `ack: Ack` for manual ack"
            ),
        ),
    )?;
    Ok(Handling {
        concurrency: match args.int("concurrency") {
            Some(lit) => bounded(lit, "concurrency", MAX_CONCURRENCY)?,
            None => DEFAULT_CONCURRENCY,
        },
        backoff: match args.str("backoff") {
            Some(lit) => backoff(lit)?,
            None => DEFAULT_BACKOFF,
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
    let handling = handling(&args, function, "delay_listener", "Message")?;
    Ok(Listener {
        topic,
        max_attempts: match args.int("max_attempts") {
            Some(lit) => bounded(lit, "max_attempts", MAX_MAX_ATTEMPTS)?,
            None => DEFAULT_MAX_ATTEMPTS,
        },
        ack_timeout_ms: match args.str("ack_timeout") {
            Some(lit) => lease_length(lit, "ack_timeout")?,
            None => DEFAULT_ACK_TIMEOUT_MS,
        },
        handling,
    })
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
];

pub(crate) const DEFAULT_MAX_DELIVERIES: u32 = 16;
pub(crate) const DEFAULT_MIN_IDLE_MS: u64 = 60_000;
pub(crate) const DEFAULT_BATCH: u32 = 100;
pub(crate) const MAX_BATCH: u32 = 10_000;

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
    let handling = handling(&args, function, "stream_listener", "StreamMessage")?;
    Ok(StreamListener {
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

pub(crate) const DEFAULT_LEADER_TTL_MS: u64 = 15_000;

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

/// The core's `LeaderLease` refuses shorter leases (renewed every third of it).
const MIN_LEADER_TTL_MS: u64 = 300;

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

#[cfg(test)]
mod tests {
    use super::duration_ms;

    #[test]
    fn durations() {
        assert_eq!(duration_ms("30s"), Some(30_000));
        assert_eq!(duration_ms("500ms"), Some(500));
        assert_eq!(duration_ms("10m"), Some(600_000));
        assert_eq!(duration_ms(" 2h"), Some(7_200_000));
        for bad in ["", "30", "s", "1.5s", "0s", "3d", "-1s"] {
            assert_eq!(duration_ms(bad), None, "{bad}");
        }
    }
}
