//! `traceparent` and `tracestate`, written as `traceparent\ntracestate`:
//! `TraceParent`'s parser, the `tracestate` a `MessageContext` takes, the
//! OpenTelemetry span context they stand for (`txoutbox_core::otel`), and
//! a message carrying them through the wire.
//!
//! Properties: `TraceParent` accepts exactly the documented format and
//! displays what it parsed, its parts are the value's; serde agrees with
//! `FromStr`; the span context has the same ids and flags and gives back
//! the same `traceparent` (version 00); a message sealed with a trace
//! context arrives with the same one.

#![no_main]

use libfuzzer_sys::fuzz_target;
use txoutbox_core::{
    MessageContext, OutboxMessage, PendingMessage, SubjectPrefix, TraceParent, otel, wire,
};
use txoutbox_fuzz::events::Audit;
use txoutbox_fuzz::{nats_text, rules};

fuzz_target!(|bytes: &[u8]| {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return;
    };
    let (traceparent, tracestate) = match text.split_once('\n') {
        Some((tp, ts)) => (tp, Some(ts)),
        None => (text, None),
    };
    let parsed = traceparent.parse::<TraceParent>();
    assert_eq!(
        parsed.is_ok(),
        rules::is_traceparent(traceparent),
        "{traceparent:?}: {parsed:?}"
    );
    let json = serde_json::to_string(traceparent).expect("a string serializes");
    assert_eq!(
        serde_json::from_str::<TraceParent>(&json).ok(),
        parsed.clone().ok()
    );
    let context = tracestate.map(|ts| MessageContext::new().with_tracestate(ts));
    if let (Some(ts), Some(context)) = (tracestate, &context) {
        assert_eq!(context.is_ok(), rules::is_tracestate(ts), "{ts:?}");
    }
    let Ok(tp) = parsed else {
        return;
    };
    parts(&tp, traceparent);
    span_context(&tp, tracestate);
    let context = match context {
        None => MessageContext::new(),
        Some(Ok(context)) => context,
        Some(Err(_)) => return,
    };
    travels(context.with_traceparent(tp));
});

fn parts(tp: &TraceParent, text: &str) {
    assert_eq!(tp.to_string(), text);
    assert_eq!(tp.as_str(), text);
    assert_eq!(tp.trace_id(), &text[3..35]);
    assert_eq!(tp.parent_id(), &text[36..52]);
    let flags = u8::from_str_radix(&text[53..55], 16).expect("two hex digits");
    assert_eq!(tp.flags(), flags);
    assert_eq!(tp.is_sampled(), flags & 1 == 1);
}

fn span_context(tp: &TraceParent, tracestate: Option<&str>) {
    let span = otel::remote_span_context(tp, tracestate);
    assert!(span.is_remote());
    assert!(span.is_valid());
    assert_eq!(span.trace_id().to_string(), tp.trace_id());
    assert_eq!(span.span_id().to_string(), tp.parent_id());
    assert_eq!(span.trace_flags().to_u8(), tp.flags());
    let back = otel::of_span_context(&span).expect("a valid span context has a trace context");
    assert_eq!(back.traceparent.trace_id(), tp.trace_id());
    assert_eq!(back.traceparent.parent_id(), tp.parent_id());
    assert_eq!(back.traceparent.flags(), tp.flags());
    if tp.as_str().starts_with("00-") {
        assert_eq!(&back.traceparent, tp);
    }
    let state = span.trace_state().header();
    assert_eq!(back.tracestate, (!state.is_empty()).then_some(state));
    assert!(otel::remote_context(tp, tracestate).is_some());
}

/// A message sealed with `context` is received with its trace context.
fn travels(context: MessageContext) {
    let pending = PendingMessage::new(&Audit {
        actor: "fuzz".into(),
        action: "trace".into(),
    })
    .expect("the event serializes");
    let message = OutboxMessage::standalone(pending, &context, &SubjectPrefix::default());
    assert_eq!(message.traceparent.as_ref(), context.traceparent());
    assert_eq!(message.tracestate.as_deref(), context.tracestate());
    let headers = wire::encode(&message, "/fuzz")
        .expect("a message with an accepted trace context can be sent");
    for (name, value) in &headers {
        assert!(rules::nats_can_carry(name, value), "{name}: {value:?}");
    }
    let sent = nats_text::render(
        &message.subject,
        headers.iter().map(|(k, v)| (k.as_ref(), v.as_str())),
        message.payload.as_bytes(),
    );
    let received = nats_text::parse(&sent).expect("what the client sends, it reads");
    let pairs = nats_text::pairs(&received.headers);
    let decoded = wire::decode(&received.subject, pairs.iter().copied(), &received.payload)
        .expect("a sealed message decodes");
    assert_eq!(decoded.traceparent, message.traceparent);
    assert_eq!(
        decoded.tracestate, message.tracestate,
        "the tracestate changed on the way"
    );
}
