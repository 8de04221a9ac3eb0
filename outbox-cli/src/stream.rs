//! `outbox stream ensure`: create the outbox's stream, or verify the
//! existing one, as `StreamSpec::ensure` does at a service's start.

use std::fmt::Write as _;
use std::time::Duration;

use clap::{Args, Subcommand, ValueEnum};
use serde_json::json;
use txoutbox_nats::StreamSpec;
use txoutbox_nats::async_nats::jetstream::stream::StorageType;

use crate::broker::BrokerError;
use crate::nats::NatsArgs;

/// `outbox stream ...`.
#[derive(Debug, Subcommand)]
pub(crate) enum StreamCommand {
    /// Creates the stream, or checks that the existing one captures the
    /// subjects and keeps message ids longer than the processor's lease;
    /// prints what it did, or how the existing stream differs (it is not
    /// changed).
    Ensure(EnsureArgs),
}

/// Where messages are kept.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum Storage {
    /// On disk.
    File,
    /// In memory.
    Memory,
}

/// `outbox stream ensure`.
#[derive(Debug, Args)]
pub(crate) struct EnsureArgs {
    /// The stream's name.
    #[arg(long)]
    stream: String,
    /// The subjects it captures (comma-separated or repeated), e.g. `events.>`.
    #[arg(long, required = true, value_delimiter = ',', num_args = 1..)]
    subjects: Vec<String>,
    /// Replicas in a cluster.
    #[arg(long, default_value_t = 1)]
    replicas: usize,
    /// How long message ids are remembered to drop re-publishes (JetStream's
    /// default: 2 min).
    #[arg(long, value_parser = humantime::parse_duration, default_value = "2m")]
    duplicate_window: Duration,
    /// How long messages are kept (0: no limit).
    #[arg(long, value_parser = humantime::parse_duration, default_value = "0s")]
    max_age: Duration,
    /// File or memory storage.
    #[arg(long, value_enum, default_value = "file")]
    storage: Storage,
    /// The processor's lease, which the duplicate window must exceed (the
    /// processor's default: 3 s).
    #[arg(long, value_parser = humantime::parse_duration, default_value = "3s")]
    lease: Duration,
    #[command(flatten)]
    nats: NatsArgs,
}

/// Runs `outbox stream ...`.
pub(crate) async fn run(command: StreamCommand, json: bool) -> Result<String, BrokerError> {
    let StreamCommand::Ensure(args) = command;
    let spec = StreamSpec::new(&args.stream, args.subjects.clone())
        .replicas(args.replicas)
        .duplicate_window(args.duplicate_window)
        .max_age(args.max_age)
        .storage(match args.storage {
            Storage::File => StorageType::File,
            Storage::Memory => StorageType::Memory,
        });
    let jetstream = args.nats.jetstream().await?;
    let ensured = spec.ensure_reporting(&jetstream, args.lease).await?;
    let config = &ensured.info.config;
    if json {
        let differences: Vec<String> = ensured.differences.iter().map(|d| d.to_string()).collect();
        return Ok(format!(
            "{}\n",
            json!({
                "stream": config.name,
                "created": ensured.created,
                "subjects": config.subjects,
                "replicas": config.num_replicas,
                "duplicate_window_seconds": config.duplicate_window.as_secs_f64(),
                "max_age_seconds": config.max_age.as_secs_f64(),
                "storage": format!("{:?}", config.storage).to_lowercase(),
                "messages": ensured.info.state.messages,
                "differences": differences,
            })
        ));
    }
    let mut out = String::new();
    let what = if ensured.created {
        "created stream"
    } else {
        "stream exists:"
    };
    let _ = writeln!(
        out,
        "{what} {} capturing {:?}: replicas {}, duplicate window {}, storage {}, max age {}, {} messages",
        config.name,
        config.subjects,
        config.num_replicas,
        humantime::format_duration(config.duplicate_window),
        format!("{:?}", config.storage).to_lowercase(),
        if config.max_age.is_zero() {
            "none".to_owned()
        } else {
            humantime::format_duration(config.max_age).to_string()
        },
        ensured.info.state.messages,
    );
    if !ensured.created {
        if ensured.differences.is_empty() {
            let _ = writeln!(out, "it fits the given settings");
        } else {
            let _ = writeln!(out, "it differs from the given settings (kept as it is):");
            for difference in &ensured.differences {
                let _ = writeln!(out, "  {difference}");
            }
        }
    }
    Ok(out)
}
