//! JetStream helpers for tests on the machine's shared nats-server: a
//! stream of the test's own (unique name and subject prefix, deleted on
//! drop) and reading back what it stored.

use async_nats::HeaderMap;
use async_nats::jetstream::{self, stream::StorageType};
use txoutbox_core::{OutboxMessage, wire};
use txoutbox_nats::StreamSpec;

/// The shared server, from `OUTBOX_TEST_NATS_URL` (default `127.0.0.1:4222`).
pub fn nats_url() -> String {
    std::env::var("OUTBOX_TEST_NATS_URL").unwrap_or_else(|_| "127.0.0.1:4222".to_owned())
}

/// A stream stored by this test alone.
#[derive(Debug)]
pub struct TestStream {
    /// The JetStream context.
    pub jetstream: jetstream::Context,
    /// The stream's name.
    pub name: String,
    /// The subject prefix the stream captures (`<prefix>.>`).
    pub prefix: String,
}

impl TestStream {
    /// Creates a fresh memory stream capturing `<unique prefix>.>` on
    /// `client`'s server.
    ///
    /// # Panics
    /// When the server is unreachable or refuses the stream.
    pub async fn new(client: async_nats::Client) -> Self {
        let tag = &uuid::Uuid::now_v7().simple().to_string()[16..];
        let (name, prefix) = (format!("T_{tag}"), format!("t{tag}"));
        let jetstream = jetstream::new(client);
        StreamSpec::new(&name, [format!("{prefix}.>")])
            .storage(StorageType::Memory)
            // Leftovers of a test that could not delete its stream expire.
            .max_age(std::time::Duration::from_secs(600))
            .ensure(&jetstream, std::time::Duration::from_secs(30))
            .await
            .expect("create the test stream");
        Self {
            jetstream,
            name,
            prefix,
        }
    }

    /// Every message in the stream, decoded, in stream order, with its
    /// stream sequence.
    ///
    /// # Panics
    /// When a stored message is not a valid envelope.
    pub async fn messages(&self) -> Vec<(u64, OutboxMessage)> {
        let mut stream = self
            .jetstream
            .get_stream(&self.name)
            .await
            .expect("the stream exists");
        let last = stream
            .info()
            .await
            .expect("stream info")
            .state
            .last_sequence;
        let mut out = Vec::new();
        for sequence in 1..=last {
            let Ok(raw) = stream.get_raw_message(sequence).await else {
                continue; // deleted
            };
            out.push((
                sequence,
                decode_stored(&raw.subject, Some(&raw.headers), &raw.payload),
            ));
        }
        out
    }

    /// How many messages the stream holds. Asks again for up to 30 s while
    /// JetStream does not answer (a cluster electing the stream's leader).
    ///
    /// # Panics
    /// When JetStream has not answered for 30 s.
    pub async fn count(&self) -> u64 {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            let info = match self.jetstream.get_stream(&self.name).await {
                Ok(mut stream) => stream
                    .info()
                    .await
                    .map(|info| info.state.messages)
                    .map_err(|e| e.to_string()),
                Err(err) => Err(err.to_string()),
            };
            match info {
                Ok(messages) => return messages,
                Err(_) if std::time::Instant::now() < deadline => {
                    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                }
                Err(err) => panic!("stream {} info: {err}", self.name),
            }
        }
    }
}

/// A message the stream stored (its subject, headers and payload), decoded
/// as the envelope the processor published.
///
/// # Panics
/// When it is not a valid envelope.
pub fn decode_stored(subject: &str, headers: Option<&HeaderMap>, payload: &[u8]) -> OutboxMessage {
    let headers: Vec<(String, String)> = headers
        .iter()
        .flat_map(|h| h.iter())
        .flat_map(|(k, vs)| vs.iter().map(move |v| (k.to_string(), v.to_string())))
        .collect();
    wire::decode(
        subject,
        headers.iter().map(|(k, v)| (k.as_str(), v.as_str())),
        payload,
    )
    .expect("every stored message is an envelope")
}

impl TestStream {
    /// Deletes the stream (tests call it at the end; drop only tries).
    pub async fn delete(self) {
        let _ = self.jetstream.delete_stream(&self.name).await;
    }
}

impl Drop for TestStream {
    fn drop(&mut self) {
        let (jetstream, name) = (self.jetstream.clone(), self.name.clone());
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(async move {
                let _ = jetstream.delete_stream(&name).await;
            });
        }
    }
}
