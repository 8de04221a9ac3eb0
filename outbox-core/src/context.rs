//! Ambient data stamped on every message a unit of work writes.

use crate::headers::{Headers, InvalidHeader};
use crate::trace::TraceParent;

/// Correlation, causation, tenant, trace context and headers that saving
/// stamps on each message of one unit of work.
///
/// A message written while handling another one should be
/// [`caused_by`](MessageContext::caused_by) it, so chains of services can be
/// followed from the first command to the last effect.
///
/// ```
/// use txoutbox_core::MessageContext;
/// let ctx = MessageContext::new()
///     .with_correlation_id("req-42")
///     .with_tenant("acme")
///     .with_header("x-region", "eu")?;
/// assert_eq!(ctx.correlation_id(), Some("req-42"));
/// # Ok::<(), txoutbox_core::InvalidHeader>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MessageContext {
    correlation_id: Option<String>,
    causation_id: Option<String>,
    tenant: Option<String>,
    traceparent: Option<TraceParent>,
    tracestate: Option<String>,
    /// The trace context was taken from a handled message ([`caused_by`](Self::caused_by)),
    /// not set: with the `opentelemetry` feature the current span's wins.
    trace_inherited: bool,
    headers: Headers,
}

impl MessageContext {
    /// An empty context: each message becomes the root of its own
    /// correlation (its correlation id is its own id).
    pub fn new() -> Self {
        Self::default()
    }

    /// A context from its parts, with an inherited trace (see
    /// [`caused_by`](Self::caused_by), which lives beside the message it
    /// reads).
    pub(crate) fn inheriting(
        correlation_id: String,
        causation_id: String,
        tenant: Option<String>,
        traceparent: Option<TraceParent>,
        tracestate: Option<String>,
    ) -> Self {
        Self {
            correlation_id: Some(correlation_id),
            causation_id: Some(causation_id),
            tenant,
            trace_inherited: traceparent.is_some(),
            traceparent,
            tracestate,
            headers: Headers::new(),
        }
    }

    /// Sets the correlation id (e.g. the id of the HTTP request).
    pub fn with_correlation_id(mut self, id: impl Into<String>) -> Self {
        self.correlation_id = Some(id.into());
        self
    }

    /// Sets the causation id: the id of the message or command that caused this one.
    pub fn with_causation_id(mut self, id: impl Into<String>) -> Self {
        self.causation_id = Some(id.into());
        self
    }

    /// Sets the tenant.
    pub fn with_tenant(mut self, tenant: impl Into<String>) -> Self {
        self.tenant = Some(tenant.into());
        self
    }

    /// Sets the W3C trace context to continue on the consumer side.
    ///
    /// With the `opentelemetry` feature, a context without one takes the
    /// current span's when its messages are sealed (see `txoutbox_core::otel`);
    /// one set here always wins.
    pub fn with_traceparent(mut self, traceparent: TraceParent) -> Self {
        self.traceparent = Some(traceparent);
        self.trace_inherited = false;
        self
    }

    /// Sets the W3C [`tracestate`](https://www.w3.org/TR/trace-context/#tracestate-header)
    /// (vendor trace data) that travels beside the `traceparent`. It must be
    /// printable ASCII without a space at either end (which a NATS client
    /// would drop); it is carried as it is.
    pub fn with_tracestate(mut self, tracestate: impl Into<String>) -> Result<Self, InvalidHeader> {
        let tracestate = tracestate.into();
        if !tracestate.bytes().all(|b| (b' '..=b'~').contains(&b))
            || crate::wire::names::not_carried(&tracestate).is_some()
        {
            return Err(InvalidHeader::BadValue(
                crate::wire::names::TRACESTATE.to_owned(),
            ));
        }
        self.tracestate = Some(tracestate);
        Ok(self)
    }

    /// Adds a header to every message.
    pub fn with_header(
        mut self,
        name: impl Into<String>,
        value: impl Into<String>,
    ) -> Result<Self, InvalidHeader> {
        self.headers.insert(name, value)?;
        Ok(self)
    }

    /// The correlation id, if set.
    pub fn correlation_id(&self) -> Option<&str> {
        self.correlation_id.as_deref()
    }

    /// The causation id, if set.
    pub fn causation_id(&self) -> Option<&str> {
        self.causation_id.as_deref()
    }

    /// The tenant, if set.
    pub fn tenant(&self) -> Option<&str> {
        self.tenant.as_deref()
    }

    /// The trace context, if set.
    pub fn traceparent(&self) -> Option<&TraceParent> {
        self.traceparent.as_ref()
    }

    /// The trace state, if set.
    pub fn tracestate(&self) -> Option<&str> {
        self.tracestate.as_deref()
    }

    /// The trace context the messages sealed now carry: the one set, or
    /// (with the `opentelemetry` feature) the current span's when none was
    /// set or it was inherited from a handled message.
    pub(crate) fn trace_to_seal(&self) -> (Option<TraceParent>, Option<String>) {
        #[cfg(feature = "opentelemetry")]
        if (self.traceparent.is_none() || self.trace_inherited)
            && let Some(current) = crate::otel::current()
        {
            return (Some(current.traceparent), current.tracestate);
        }
        (self.traceparent.clone(), self.tracestate.clone())
    }

    /// Headers added to every message.
    pub fn headers(&self) -> &Headers {
        &self.headers
    }
}
