//! Message ids (`MessageId`, also `ce-id` on the wire and the id the
//! command line takes): parsing text, and any 16 bytes as an id.
//!
//! Properties: an id parses exactly when its UUID does, displays as 36
//! lowercase hyphenated characters, and parses back to itself, from its
//! display and from its JSON (serde agrees with `FromStr`).

#![no_main]

use libfuzzer_sys::fuzz_target;
use txoutbox_core::MessageId;
use txoutbox_core::uuid::Uuid;

fuzz_target!(|bytes: &[u8]| {
    if let Ok(uuid) = Uuid::from_slice(bytes) {
        round_trips(MessageId::from_uuid(uuid));
    }
    let Ok(text) = std::str::from_utf8(bytes) else {
        return;
    };
    let parsed = text.parse::<MessageId>();
    assert_eq!(
        parsed.as_ref().ok().map(|id| *id.as_uuid()),
        Uuid::parse_str(text).ok()
    );
    let json = serde_json::to_string(text).expect("a string serializes");
    assert_eq!(
        serde_json::from_str::<MessageId>(&json).ok(),
        parsed.as_ref().ok().copied()
    );
    if let Ok(id) = parsed {
        round_trips(id);
    }
});

fn round_trips(id: MessageId) {
    let shown = id.to_string();
    assert_eq!(shown.len(), 36);
    assert!(
        shown
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f' | b'-'))
    );
    assert_eq!(shown.parse::<MessageId>().ok(), Some(id));
    let json = serde_json::to_string(&id).expect("an id serializes");
    assert_eq!(json, format!("\"{shown}\""));
    assert_eq!(serde_json::from_str::<MessageId>(&json).ok(), Some(id));
}
