//! Writes the seed corpus, `fuzz/corpus/<target>/`, from real messages
//! (`txoutbox_fuzz::seeds`): the headers and payloads the publisher sends,
//! the rows the store writes, the command lines an operator types. Run it
//! from `fuzz/` after changing the wire, the events or the command line:
//! `cargo run --example seeds`, then commit what changed.

use std::path::{Path, PathBuf};

use txoutbox_core::schema::check_against;
use txoutbox_core::{OutboxMessage, wire};
use txoutbox_fuzz::{events, nats_text, seeds};
use txoutbox_sea_orm::__fuzz::StoredRow;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let messages = seeds::messages();
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
    let mut total = 0;
    for (target, files) in [
        ("envelope_decode", envelope(&messages)?),
        ("message_roundtrip", roundtrip(&messages)?),
        ("registry_decode", registry(&messages)),
        ("trace_context", trace(&messages)),
        ("naming", naming(&messages)),
        ("message_id", ids(&messages)),
        ("stored_row", rows(&messages)?),
        ("schema_lock", locks()?),
        ("cli_args", command_lines(&messages)),
    ] {
        total += files.len();
        write(&corpus.join(target), &files)?;
    }
    println!("{total} seeds in {}", corpus.display());
    Ok(())
}

/// Replaces the seeds of one target (files named `seed-*`; inputs found by
/// fuzzing and kept by hand have other names).
fn write(dir: &PathBuf, files: &[Vec<u8>]) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("seed-"))
        {
            std::fs::remove_file(path)?;
        }
    }
    for (n, bytes) in files.iter().enumerate() {
        std::fs::write(dir.join(format!("seed-{n:02}")), bytes)?;
    }
    Ok(())
}

/// Each message as the publisher sends it: subject, headers, payload.
fn envelope(messages: &[OutboxMessage]) -> Result<Vec<Vec<u8>>, wire::WireError> {
    let mut files = Vec::new();
    for message in messages {
        let headers = encoded(message)?;
        files.push(nats_text::render(
            &message.subject,
            headers.iter().map(|(k, v)| (k.as_str(), v.as_str())),
            message.payload.as_bytes(),
        ));
    }
    Ok(files)
}

/// The headers the publisher sends `message` with.
fn encoded(message: &OutboxMessage) -> Result<Vec<(String, String)>, wire::WireError> {
    Ok(wire::encode(message, seeds::SOURCE)?
        .into_iter()
        .map(|(name, value)| (name.into_owned(), value))
        .collect())
}

/// Each message's JSON form.
fn roundtrip(messages: &[OutboxMessage]) -> Result<Vec<Vec<u8>>, serde_json::Error> {
    messages.iter().map(serde_json::to_vec_pretty).collect()
}

/// `name\nversion\npayload` of each message.
fn registry(messages: &[OutboxMessage]) -> Vec<Vec<u8>> {
    messages
        .iter()
        .map(|m| {
            format!(
                "{}\n{}\n{}",
                m.event_name,
                m.event_version,
                m.payload.as_str()
            )
            .into_bytes()
        })
        .collect()
}

/// The trace contexts the messages carry, and the specification's example.
fn trace(messages: &[OutboxMessage]) -> Vec<Vec<u8>> {
    let mut files: Vec<Vec<u8>> = messages
        .iter()
        .filter_map(|m| {
            let tp = m.traceparent.as_ref()?;
            Some(match &m.tracestate {
                Some(ts) => format!("{tp}\n{ts}"),
                None => tp.to_string(),
            })
        })
        .map(String::into_bytes)
        .collect();
    files.push(seeds::TRACEPARENT.as_bytes().to_vec());
    files.push(
        format!(
            "{}\n{}",
            seeds::TRACEPARENT.replace("-01", "-00"),
            "vendor=a b"
        )
        .into_bytes(),
    );
    files
}

/// Names, subjects and headers of the messages.
fn naming(messages: &[OutboxMessage]) -> Vec<Vec<u8>> {
    let mut names: Vec<String> = Vec::new();
    for m in messages {
        names.push(m.event_name.clone());
        names.push(m.subject.clone());
        names.extend(m.headers.iter().map(|(k, v)| format!("{k}\n{v}")));
    }
    names.push(format!("{}\n{}", wire::TRACESTATE, seeds::TRACESTATE));
    names.sort();
    names.dedup();
    names.into_iter().map(String::into_bytes).collect()
}

/// The ids of the messages, in the forms a UUID is written.
fn ids(messages: &[OutboxMessage]) -> Vec<Vec<u8>> {
    messages
        .iter()
        .take(4)
        .flat_map(|m| {
            let uuid = m.id.as_uuid();
            [
                m.id.to_string(),
                uuid.simple().to_string(),
                uuid.urn().to_string(),
                uuid.braced().to_string().to_uppercase(),
            ]
        })
        .chain(
            messages
                .iter()
                .take(2)
                .map(|m| String::from_utf8_lossy(m.id.as_uuid().as_bytes()).into_owned()),
        )
        .map(String::into_bytes)
        .collect()
}

/// The row each message is written as.
fn rows(messages: &[OutboxMessage]) -> Result<Vec<Vec<u8>>, Box<dyn std::error::Error>> {
    let mut files = Vec::new();
    for message in messages {
        let row = StoredRow::of(message)?;
        let json = serde_json::json!({
            "id": row.id,
            "aggregate_type": row.aggregate_type,
            "aggregate_id": row.aggregate_id,
            "sequence": row.sequence,
            "event_name": row.event_name,
            "event_version": row.event_version,
            "subject": row.subject,
            "payload": row.payload,
            "headers": row.headers,
            "correlation_id": row.correlation_id,
            "causation_id": row.causation_id,
            "tenant": row.tenant,
            "traceparent": row.traceparent,
            "occurred_at": row.occurred_at,
        });
        files.push(serde_json::to_vec_pretty(&json)?);
    }
    Ok(files)
}

/// The lock file `SchemaLock::update` writes for the fuzz registry, one
/// without the newest version, and one whose v1 changed a field's type.
fn locks() -> Result<Vec<Vec<u8>>, serde_json::Error> {
    let lock = check_against(&serde_json::json!({}), events::registry()).lock;
    let mut older = lock.clone();
    if let Some(placed) = older
        .get_mut("shop.order.placed")
        .and_then(|v| v.as_object_mut())
    {
        placed.remove("3");
    }
    let mut changed = lock.clone();
    if let Some(total) = changed.pointer_mut("/shop.order.placed/1/properties/total") {
        *total = serde_json::json!({ "type": "string" });
    }
    [lock, older, changed]
        .iter()
        .map(|lock| {
            let mut text = serde_json::to_vec_pretty(lock)?;
            text.push(b'\n');
            Ok(text)
        })
        .collect()
}

/// Command lines an operator types, with the messages' ids.
fn command_lines(messages: &[OutboxMessage]) -> Vec<Vec<u8>> {
    let (a, b) = (messages[0].id.to_string(), messages[1].id.to_string());
    let lines: Vec<Vec<String>> = vec![
        vec!["dead".into(), "show".into(), a.clone()],
        vec![
            "dead".into(),
            "requeue".into(),
            a.clone(),
            b.clone(),
            "--yes".into(),
        ],
        vec![
            "dead".into(),
            "skip".into(),
            b,
            "--reason".into(),
            "cancelled by hand".into(),
            "-y".into(),
        ],
        vec![
            "--json".into(),
            "dead".into(),
            "list".into(),
            "--limit".into(),
            "20".into(),
        ],
        vec![
            "purge".into(),
            "--published-before".into(),
            "7d".into(),
            "--yes".into(),
        ],
        vec![
            "purge".into(),
            "inbox".into(),
            "--consumer".into(),
            "billing".into(),
            "--before=12h 30min".into(),
        ],
        vec![
            "verify".into(),
            "--stream".into(),
            "EVENTS".into(),
            "--since".into(),
            "1h".into(),
            "--pending-older-than".into(),
            "90s".into(),
            "--nats-url".into(),
            "nats://u:pw@n1:4222,nats://n2:4222".into(),
        ],
        vec![
            "stream".into(),
            "ensure".into(),
            "--stream".into(),
            "EVENTS".into(),
            "--subjects".into(),
            "events.>,audit.shop".into(),
            "--duplicate-window".into(),
            "2m".into(),
            "--max-age".into(),
            "30days".into(),
            "--lease".into(),
            "3s".into(),
        ],
        vec![
            "dlq".into(),
            "show".into(),
            "--consumer".into(),
            "billing".into(),
            "--nats-user".into(),
            "ops".into(),
            "--nats-password".into(),
            "s3cret-pw".into(),
            "7".into(),
        ],
        vec![
            "dlq".into(),
            "replay".into(),
            "--subject".into(),
            "dlq.billing".into(),
            "3".into(),
            "4".into(),
            "--nats-token=tok-123456".into(),
        ],
        vec![
            "--database-url".into(),
            "postgres://app:db-pass@db:5432/app".into(),
            "status".into(),
            "--watch".into(),
            "5".into(),
        ],
        vec![
            "aggregate".into(),
            messages[0].aggregate_type.clone(),
            messages[0].aggregate_id.clone(),
        ],
        vec![
            "release".into(),
            "--consumer".into(),
            "billing".into(),
            "order".into(),
            "7".into(),
            "--skip".into(),
            "--yes".into(),
        ],
    ];
    lines
        .into_iter()
        .map(|args| args.join("\n").into_bytes())
        .collect()
}
