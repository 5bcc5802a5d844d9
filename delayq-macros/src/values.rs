//! The values an attribute option takes, each checked on its span: names (the topic rule),
//! humane durations, backoff policies, bounded counts; the rules, defaults and limits are
//! `delayq-spec`'s, which the runtime checks too.

use syn::LitStr;

use crate::attr::attribute_span;

pub(crate) use delayq_spec::defaults::{
    ACK_TIMEOUT_MS as DEFAULT_ACK_TIMEOUT_MS, BACKOFF as DEFAULT_BACKOFF,
    CONCURRENCY as DEFAULT_CONCURRENCY, MAX_ATTEMPTS as DEFAULT_MAX_ATTEMPTS, MAX_CONCURRENCY,
    MAX_MAX_ATTEMPTS, MIN_ACK_TIMEOUT_MS,
};
pub(crate) use delayq_spec::Backoff;

/// A spanned compile error from a rule's refusal.
pub(crate) fn refused(span: proc_macro2::Span, e: &delayq_spec::SpecError) -> syn::Error {
    syn::Error::new(span, format!("invalid {}: {}", e.field, e.reason))
}

/// A topic, stream, group or leader-task name (`what`): the name rule.
pub(crate) fn name(lit: &LitStr, what: &str) -> syn::Result<String> {
    let name = lit.value();
    match delayq_spec::name_problem(&name) {
        None => Ok(name),
        Some(_) => Err(syn::Error::new(
            lit.span(),
            format!("invalid {what}: use {}", delayq_spec::NAME_RULE),
        )),
    }
}

pub(crate) fn required<'a>(
    lit: Option<&'a LitStr>,
    what: &str,
    example: &str,
) -> syn::Result<&'a LitStr> {
    lit.ok_or_else(|| syn::Error::new(attribute_span(), format!("missing {what}: write {example}")))
}

pub(crate) fn duration(lit: &LitStr, what: &str) -> syn::Result<u64> {
    delayq_spec::duration::positive_ms(&lit.value()).ok_or_else(|| {
        syn::Error::new(
            lit.span(),
            format!(
                "malformed {what}: expected a positive duration: {}",
                delayq_spec::duration::FORMAT
            ),
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
    Backoff::parse(&lit.value())
        .map_err(|reason| syn::Error::new(lit.span(), format!("malformed backoff: {reason}")))
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
