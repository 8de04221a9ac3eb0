//! Every error says its cause once: through `source()`, not also in its
//! own message (so `anyhow`'s `{:#}`, `ErrorChain` and the operator tool's
//! one-line errors show each cause once).

use std::collections::HashMap;
use std::error::Error;

use serde::{Deserialize, Serialize};
use txoutbox_core::processor::ProcessorError;
use txoutbox_core::{
    ErrorChain, EventRegistry, IntegrationEvent, PendingMessage, PublishError, StoreError,
};

/// Fails when an error of the chain repeats the message of its source.
fn assert_each_cause_said_once(err: &dyn Error) {
    let mut current = err;
    while let Some(source) = current.source() {
        let (text, cause) = (current.to_string(), source.to_string());
        assert!(
            !text.contains(&cause),
            "`{text}` repeats its source `{cause}` (full chain: {})",
            ErrorChain(err)
        );
        current = source;
    }
}

#[derive(Serialize, Deserialize, IntegrationEvent)]
#[event(name = "test.chain")]
struct Chained {
    by_pair: HashMap<(u8, u8), u8>,
}

struct BadName;
impl Serialize for BadName {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_unit()
    }
}
impl<'de> Deserialize<'de> for BadName {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        <()>::deserialize(d).map(|()| BadName)
    }
}
impl IntegrationEvent for BadName {
    const NAME: &'static str = "Not A Name";
    const VERSION: u32 = 1;
}

#[test]
fn record_error() {
    let event = Chained {
        by_pair: HashMap::from([((1, 2), 3)]),
    };
    let err = PendingMessage::new(&event).expect_err("tuple keys are not JSON");
    assert!(err.source().is_some());
    assert_each_cause_said_once(&err);
    assert!(
        ErrorChain(&err)
            .to_string()
            .contains("key must be a string")
    );
}

#[test]
fn registry_and_decode_errors() {
    let Err(err) = EventRegistry::builder().register::<BadName>().build() else {
        panic!("an invalid name is refused");
    };
    assert!(err.source().is_some());
    assert_each_cause_said_once(&err);

    let registry = EventRegistry::builder()
        .register::<Chained>()
        .build()
        .expect("registry");
    let err = registry
        .decode_as::<Chained>("test.chain", 1, b"{\"by_pair\": 7}")
        .err()
        .expect("malformed");
    assert!(err.source().is_some());
    assert_each_cause_said_once(&err);
}

#[test]
fn wire_error() {
    let json = serde_json::from_slice::<serde_json::Value>(b"{not json").expect_err("not JSON");
    let err = txoutbox_core::wire::WireError::Payload(json);
    assert!(err.source().is_some());
    assert_each_cause_said_once(&err);
}

#[test]
fn store_and_publish_errors() {
    let cause = || std::io::Error::other("connection reset by peer");
    let store = StoreError::new("claiming", cause());
    assert_each_cause_said_once(&store);
    assert_eq!(
        ErrorChain(&store).to_string(),
        "outbox store: claiming: connection reset by peer"
    );
    let publish = PublishError::unavailable("publishing on `events.x`").with_source(cause());
    assert_each_cause_said_once(&publish);
}

#[tokio::test]
async fn processor_error() {
    let join = tokio::spawn(async { panic!("boom") })
        .await
        .expect_err("the task panicked");
    let err = ProcessorError::from(join);
    assert!(err.source().is_some());
    assert_each_cause_said_once(&err);
}
