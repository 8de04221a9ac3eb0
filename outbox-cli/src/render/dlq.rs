//! `outbox dlq list|show|replay`: a consumer's dead letters.

use std::fmt::Write as _;

use serde_json::json;
use txoutbox_nats::subscriber::dead_letter_replay::{DeadLetter, Replayed};

/// The dead letters on `subject` (kept in `stream`).
pub(crate) fn list(list: &[DeadLetter], subject: &str, stream: &str, as_json: bool) -> String {
    if as_json {
        let rows: Vec<_> = list.iter().map(|l| letter_json(l, false)).collect();
        return format!("{}\n", json!(rows));
    }
    if list.is_empty() {
        return format!("no dead letters on {subject} (stream {stream})\n");
    }
    let mut out = String::new();
    for letter in list {
        let _ = writeln!(
            out,
            "{}  {}  {}  {}  from {}  {} deliveries\n    {}",
            letter.sequence,
            letter.time.format("%Y-%m-%d %H:%M:%S"),
            or_dash(letter.event_name.as_deref()),
            or_dash(letter.kind.as_deref()),
            or_dash(letter.original_subject.as_deref()),
            letter.deliveries.map_or("-".to_owned(), |d| d.to_string()),
            or_dash(letter.reason.as_deref()),
        );
    }
    out
}

/// One dead letter in full.
pub(crate) fn show(letter: &DeadLetter, as_json: bool) -> String {
    if as_json {
        return format!("{}\n", letter_json(letter, true));
    }
    let mut out = String::new();
    let _ = writeln!(out, "dead letter {}", letter.sequence);
    let _ = writeln!(out, "time      {}", letter.time.to_rfc3339());
    let _ = writeln!(
        out,
        "subject   {}",
        or_dash(letter.original_subject.as_deref())
    );
    let _ = writeln!(out, "event     {}", or_dash(letter.event_name.as_deref()));
    let _ = writeln!(out, "id        {}", or_dash(letter.message_id.as_deref()));
    let _ = writeln!(out, "kind      {}", or_dash(letter.kind.as_deref()));
    let _ = writeln!(out, "reason    {}", or_dash(letter.reason.as_deref()));
    let _ = writeln!(out, "headers");
    for (name, value) in &letter.headers {
        let _ = writeln!(out, "  {name}: {value}");
    }
    let _ = writeln!(out, "payload");
    let _ = writeln!(out, "  {}", String::from_utf8_lossy(&letter.payload));
    out
}

/// What replaying the dead letter `sequence` would do (on stderr, before
/// the question).
pub(crate) fn replay_plan(sequence: u64, letter: &DeadLetter) -> String {
    format!(
        "dead letter {sequence} ({}) goes back to {}\n",
        or_dash(letter.event_name.as_deref()),
        or_dash(letter.original_subject.as_deref())
    )
}

/// The dead letters replayed.
pub(crate) fn replayed(replayed: &[Replayed], as_json: bool) -> String {
    if as_json {
        let rows: Vec<_> = replayed.iter().map(replayed_json).collect();
        return format!("{}\n", json!(rows));
    }
    let mut out = String::new();
    for r in replayed {
        let _ = writeln!(
            out,
            "replayed dead letter {} to {} as {} (replay of {}), stored in {} at {}",
            r.dead_letter,
            r.subject,
            r.message_id,
            or_dash(r.replay_of.as_deref()),
            r.stream,
            r.stream_sequence
        );
    }
    out
}

fn or_dash(value: Option<&str>) -> &str {
    value.unwrap_or("-")
}

fn letter_json(letter: &DeadLetter, full: bool) -> serde_json::Value {
    let mut value = json!({
        "sequence": letter.sequence,
        "time": letter.time.to_rfc3339(),
        "subject": letter.original_subject,
        "id": letter.message_id,
        "event": letter.event_name,
        "kind": letter.kind,
        "reason": letter.reason,
        "consumer": letter.consumer,
        "stream": letter.original_stream,
        "stream_sequence": letter.original_sequence,
        "deliveries": letter.deliveries,
    });
    if full && let Some(fields) = value.as_object_mut() {
        let headers: Vec<_> = letter
            .headers
            .iter()
            .map(|(name, value)| json!([name, value]))
            .collect();
        fields.insert("headers".to_owned(), json!(headers));
        fields.insert(
            "payload".to_owned(),
            json!(String::from_utf8_lossy(&letter.payload)),
        );
    }
    value
}

fn replayed_json(replayed: &Replayed) -> serde_json::Value {
    json!({
        "dead_letter": replayed.dead_letter,
        "subject": replayed.subject,
        "id": replayed.message_id.to_string(),
        "replay_of": replayed.replay_of,
        "stream": replayed.stream,
        "stream_sequence": replayed.stream_sequence,
    })
}
