//! Trace propagation (feature `otel`): a message sent from inside a span that OpenTelemetry
//! tracks carries that span's context as a W3C `traceparent` in its envelope, and the
//! runtime's span for the handler run follows from it, so a trace crosses the delay.

/// The current span's context as a W3C `traceparent`, or empty when there is none (no
/// OpenTelemetry layer, no span, or the feature is off).
#[cfg(feature = "otel")]
pub(crate) fn current_traceparent() -> String {
    use opentelemetry::trace::TraceContextExt;
    use tracing_opentelemetry::OpenTelemetrySpanExt;
    let context = tracing::Span::current().context();
    let span = context.span();
    let sc = span.span_context();
    if !sc.is_valid() {
        return String::new();
    }
    format!(
        "00-{}-{}-{:02x}",
        sc.trace_id(),
        sc.span_id(),
        sc.trace_flags().to_u8()
    )
}

#[cfg(not(feature = "otel"))]
pub(crate) fn current_traceparent() -> String {
    String::new()
}

/// The remote parent a `traceparent` names, for the handler's span; `None` when it is empty
/// or malformed (a bad one is ignored, never an error: tracing must not lose a message).
#[cfg(feature = "otel")]
pub fn parent_context(traceparent: &str) -> Option<opentelemetry::Context> {
    use opentelemetry::trace::{
        SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState,
    };
    let mut parts = traceparent.split('-');
    let (Some("00"), Some(trace), Some(span), Some(flags), None) = (
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
    ) else {
        return None;
    };
    if trace.len() != 32 || span.len() != 16 || flags.len() != 2 {
        return None;
    }
    let sc = SpanContext::new(
        TraceId::from_hex(trace).ok()?,
        SpanId::from_hex(span).ok()?,
        TraceFlags::new(u8::from_str_radix(flags, 16).ok()?),
        true,
        TraceState::default(),
    );
    sc.is_valid()
        .then(|| opentelemetry::Context::new().with_remote_span_context(sc))
}

#[cfg(all(test, feature = "otel"))]
mod tests {
    use super::*;

    #[test]
    fn traceparents_parse_or_are_ignored() {
        let ok = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        assert!(parent_context(ok).is_some());
        for bad in [
            "",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-zz-00f067aa0ba902b7-01",
        ] {
            assert!(parent_context(bad).is_none(), "{bad}");
        }
    }
}
