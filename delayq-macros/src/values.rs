//! The values an attribute option takes, each checked on its span: names (the topic rule),
//! humane durations, backoff policies, bounded counts; with the defaults and limits.

use syn::LitStr;

use crate::attr::attribute_span;

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
/// Topic names: the same rule as `delayq_core`'s `validate_topic` (names.rs), which checks
/// names given at run time; a proc-macro crate cannot call it, so each cites the other.
const MAX_TOPIC_LEN: usize = 128;

/// A retry delay policy, in milliseconds.
pub(crate) enum Backoff {
    Exponential { base_ms: u64, max_ms: u64 },
    Fixed { ms: u64 },
}

/// A topic, stream, group or leader-task name (`what`): the topic rule.
pub(crate) fn name(lit: &LitStr, what: &str) -> syn::Result<String> {
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

pub(crate) fn required<'a>(
    lit: Option<&'a LitStr>,
    what: &str,
    example: &str,
) -> syn::Result<&'a LitStr> {
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

pub(crate) fn duration(lit: &LitStr, what: &str) -> syn::Result<u64> {
    duration_ms(&lit.value()).ok_or_else(|| {
        syn::Error::new(
            lit.span(),
            format!("malformed {what}: expected a positive whole number with a unit ms, s, m or h, like \"30s\" or \"500ms\""),
        )
    })
}

/// A duration that must be at least [`MIN_ACK_TIMEOUT_MS`]: a lease renewed every third of it.
pub(crate) fn lease_length(lit: &LitStr, what: &str) -> syn::Result<u64> {
    let ms = duration(lit, what)?;
    if ms < MIN_ACK_TIMEOUT_MS {
        return Err(syn::Error::new(
            lit.span(),
            format!("{what} must be at least {MIN_ACK_TIMEOUT_MS}ms: the lease is renewed every third of it, and a shorter one lapses on a single slow Redis round trip"),
        ));
    }
    Ok(ms)
}

pub(crate) fn backoff(lit: &LitStr) -> syn::Result<Backoff> {
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

pub(crate) fn bounded(lit: &syn::LitInt, name: &str, max: u32) -> syn::Result<u32> {
    match lit.base10_parse::<u32>() {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ => Err(syn::Error::new(
            lit.span(),
            format!("`{name}` must be between 1 and {max}"),
        )),
    }
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
