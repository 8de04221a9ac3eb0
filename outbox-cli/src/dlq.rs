//! `outbox dlq`: a consumer's dead letters: list, show, replay after a fix.

use std::fmt::Write as _;

use clap::{Args, Subcommand};
use serde_json::json;
use txoutbox_nats::subscriber::dead_letter_replay::{DeadLetter, DeadLetters, Replayed};

use crate::broker::BrokerError;
use crate::error::CliError;
use crate::nats::NatsArgs;

/// `outbox dlq ...`.
#[derive(Debug, Subcommand)]
pub(crate) enum DlqCommand {
    /// The oldest dead letters: sequence, event, why.
    List {
        #[command(flatten)]
        on: Letters,
        /// How many.
        #[arg(long, default_value_t = 50)]
        limit: usize,
    },
    /// One dead letter: its original subject, every header, the payload.
    Show {
        #[command(flatten)]
        on: Letters,
        /// Its sequence in the dead-letter stream.
        sequence: u64,
    },
    /// Publishes dead letters back to their original subjects, each with a
    /// new message id and `Outbox-Replay-Of` = the original id.
    Replay {
        #[command(flatten)]
        on: Letters,
        /// Their sequences in the dead-letter stream.
        #[arg(required = true)]
        sequences: Vec<u64>,
        /// Do it (without it, print what would be done).
        #[arg(long)]
        yes: bool,
    },
}

/// Whose dead letters.
#[derive(Debug, Args)]
pub(crate) struct Letters {
    /// The consumer (durable name): its dead letters are on `dlq.<NAME>`.
    #[arg(long, required_unless_present = "subject")]
    consumer: Option<String>,
    /// The dead-letter subject, for a consumer with
    /// `DeadLetterPolicy::publish_to`.
    #[arg(long, conflicts_with = "consumer")]
    subject: Option<String>,
    #[command(flatten)]
    nats: NatsArgs,
}

impl Letters {
    async fn open(&self) -> Result<DeadLetters, BrokerError> {
        let jetstream = self.nats.jetstream().await?;
        let subject = match (&self.consumer, &self.subject) {
            (_, Some(subject)) => subject.clone(),
            (Some(consumer), None) => format!("dlq.{consumer}"),
            (None, None) => {
                return Err(BrokerError::Usage(
                    "name the consumer (--consumer) or the subject (--subject)".to_owned(),
                ));
            }
        };
        Ok(DeadLetters::on_subject(&jetstream, subject).await?)
    }
}

/// Runs `outbox dlq ...`.
pub(crate) async fn run(command: DlqCommand, json: bool) -> Result<String, CliError> {
    match command {
        DlqCommand::List { on, limit } => {
            let letters = on.open().await?;
            let list = letters.list(limit).await?;
            if json {
                let rows: Vec<_> = list.iter().map(|l| letter_json(l, false)).collect();
                return Ok(format!("{}\n", json!(rows)));
            }
            if list.is_empty() {
                return Ok(format!(
                    "no dead letters on {} (stream {})\n",
                    letters.subject(),
                    letters.stream()
                ));
            }
            let mut out = String::new();
            for letter in &list {
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
            Ok(out)
        }
        DlqCommand::Show { on, sequence } => {
            let letter = on.open().await?.get(sequence).await?;
            if json {
                return Ok(format!("{}\n", letter_json(&letter, true)));
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
            Ok(out)
        }
        DlqCommand::Replay { on, sequences, yes } => {
            let letters = on.open().await?;
            if !yes {
                // What it would do, then the same question as every change.
                for sequence in &sequences {
                    let letter = letters.get(*sequence).await?;
                    eprintln!(
                        "dead letter {sequence} ({}) goes back to {}",
                        or_dash(letter.event_name.as_deref()),
                        or_dash(letter.original_subject.as_deref())
                    );
                }
            }
            crate::confirm::confirm(&format!("replay {} dead letter(s)", sequences.len()), yes)?;
            let mut replayed = Vec::new();
            for sequence in sequences {
                replayed.push(letters.replay(sequence).await?);
            }
            if json {
                let rows: Vec<_> = replayed.iter().map(replayed_json).collect();
                return Ok(format!("{}\n", json!(rows)));
            }
            let mut out = String::new();
            for r in &replayed {
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
            Ok(out)
        }
    }
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
