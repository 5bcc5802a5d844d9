//! Trace propagation (feature `otel`): a message sent inside a traced span is handled in a span
//! of the same trace, whose parent is the sender's span, across the delay; a message sent
//! outside any span is handled without one. One test per binary: the subscriber is global.

use std::time::Duration;

use delayq_dev::{producer, runtime, RedisServer, Seen};
use delayq_runtime::delay_listener;
use opentelemetry::trace::{SpanId, TraceContextExt, TraceId, TracerProvider as _};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
use tracing::Instrument;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::prelude::*;

/// (payload, the trace id the handler runs in).
static HANDLED: Seen<(u32, TraceId)> = Seen::new();

#[delay_listener(topic = "trace.orders")]
async fn handle(n: u32) {
    let context = tracing::Span::current().context();
    HANDLED.push((n, context.span().span_context().trace_id()));
}

/// The trace and span id of the current span.
fn current_ids() -> (TraceId, SpanId) {
    let context = tracing::Span::current().context();
    let span = context.span();
    let sc = span.span_context();
    (sc.trace_id(), sc.span_id())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trace_crosses_the_delay() {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let subscriber = tracing_subscriber::registry()
        .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("delayq-test")));
    tracing::subscriber::set_global_default(subscriber).expect("the only subscriber");

    let server = RedisServer::start();
    let p = producer(&server).await;
    let rt = runtime(&server, &["trace.orders"]).await;

    // A request handler sends a reminder from inside its span.
    let request = tracing::info_span!("http.request");
    let (sender_trace, sender_span) = async {
        p.send("trace.orders", &1u32, Duration::from_millis(300))
            .await
            .unwrap();
        current_ids()
    }
    .instrument(request)
    .await;
    assert_ne!(sender_trace, TraceId::INVALID);
    // And one is sent outside any span.
    p.send("trace.orders", &2u32, Duration::ZERO).await.unwrap();

    let mut handled = HANDLED.wait_for(2, Duration::from_secs(10)).await;
    handled.sort_by_key(|(n, _)| *n);
    assert_eq!(
        handled[0],
        (1, sender_trace),
        "the handler runs in the sender's trace"
    );
    assert_ne!(
        handled[1].1, sender_trace,
        "sent outside the span: not in its trace"
    );
    rt.shutdown().await.unwrap();

    // A span is exported when it closes: when its worker task has settled and ended.
    let mut spans = Vec::new();
    for _ in 0..100 {
        let _ = provider.force_flush();
        spans = exporter.get_finished_spans().expect("the exported spans");
        if spans.iter().filter(|s| s.name == "delayq.handle").count() >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let handler_spans: Vec<_> = spans.iter().filter(|s| s.name == "delayq.handle").collect();
    assert_eq!(handler_spans.len(), 2, "one per handler run: {spans:?}");
    let (traced, untraced): (Vec<_>, Vec<_>) = handler_spans
        .into_iter()
        .partition(|s| s.span_context.trace_id() == sender_trace);
    assert_eq!(traced.len(), 1, "{spans:?}");
    assert_eq!(
        traced[0].parent_span_id, sender_span,
        "it follows from the sender's span"
    );
    assert_eq!(
        untraced[0].parent_span_id,
        SpanId::INVALID,
        "the untraced one is a root"
    );
    let attrs: Vec<String> = traced[0]
        .attributes
        .iter()
        .map(|kv| format!("{}={}", kv.key, kv.value))
        .collect();
    assert!(attrs.iter().any(|a| a == "topic=trace.orders"), "{attrs:?}");
}
