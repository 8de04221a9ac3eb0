//! The commands that reach the broker: `verify` (the table against the
//! stream), `stream ensure`, and a consumer's dead letters (`dlq`).

use clap::Subcommand;
use txoutbox_core::StoreError;
use txoutbox_nats::ConnectError;
use txoutbox_nats::StreamError;
use txoutbox_nats::stream_read::ReadError;
use txoutbox_nats::subscriber::dead_letter_replay::DeadLetterError;

use crate::commands::Target;
use crate::error::CliError;
use crate::{dlq, stream, verify};

/// Commands on NATS JetStream.
#[derive(Debug, Subcommand)]
pub(crate) enum BrokerCommand {
    /// Checks the outbox table against the stream: every row marked
    /// published is in the stream, no message is stored twice, each
    /// aggregate's messages are in order, nothing stays pending too long.
    /// Exits 1 on any discrepancy.
    Verify(verify::VerifyArgs),
    /// The stream the outbox publishes to.
    #[command(subcommand)]
    Stream(stream::StreamCommand),
    /// A consumer's dead letters: list, show, replay.
    #[command(subcommand)]
    Dlq(dlq::DlqCommand),
}

/// Why a broker command failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BrokerError {
    /// Bad arguments or settings.
    #[error("{0}")]
    Usage(String),
    /// NATS could not be reached.
    #[error(transparent)]
    Connect(#[from] ConnectError),
    /// The stream could not be created or does not fit.
    #[error(transparent)]
    Stream(#[from] StreamError),
    /// The stream could not be read.
    #[error(transparent)]
    Read(#[from] ReadError),
    /// Dead letters could not be read or replayed.
    #[error(transparent)]
    DeadLetter(#[from] DeadLetterError),
    /// The outbox table could not be read.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// `verify` found discrepancies; `output` is its report.
    #[error("verify found {count} discrepanc{}", if *count == 1 { "y" } else { "ies" })]
    Discrepancies {
        /// The report, printed on standard output.
        output: String,
        /// How many.
        count: usize,
    },
}

impl CliError {
    /// What to print on standard output although the command failed.
    pub(crate) fn output(&self) -> Option<&str> {
        match self {
            CliError::Broker(BrokerError::Discrepancies { output, .. }) => Some(output),
            _ => None,
        }
    }
}

/// Runs a broker command.
pub(crate) async fn run(command: BrokerCommand, target: &Target) -> Result<String, CliError> {
    match command {
        BrokerCommand::Verify(args) => {
            let outbox = crate::commands::connect_outbox(target).await?;
            Ok(verify::run(args, &outbox.store(), target.json).await?)
        }
        BrokerCommand::Stream(command) => Ok(stream::run(command, target.json).await?),
        BrokerCommand::Dlq(command) => Ok(dlq::run(command, target.json).await?),
    }
}
