//! The arguments of the commands that reach NATS (`verify`, `stream
//! ensure`, `dlq`), and the NATS connection options they share. Part of
//! the command line in `opt`.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand, ValueEnum};
use txoutbox_core::redact::{REDACTED, redact_url};

/// `outbox verify`.
#[derive(Debug, Args)]
pub(crate) struct VerifyArgs {
    /// The stream the outbox publishes to.
    #[arg(long)]
    pub(crate) stream: String,
    /// Only rows published within this long (e.g. `1h`, `30m`); default:
    /// every published row (and, if the stream has an age limit, those
    /// younger than it).
    #[arg(long, value_parser = humantime::parse_duration)]
    pub(crate) since: Option<Duration>,
    /// A row pending longer than this is a discrepancy.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "5m")]
    pub(crate) pending_older_than: Duration,
    #[command(flatten)]
    pub(crate) nats: NatsArgs,
}

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
    pub(crate) stream: String,
    /// The subjects it captures (comma-separated or repeated), e.g. `events.>`.
    #[arg(long, required = true, value_delimiter = ',', num_args = 1..)]
    pub(crate) subjects: Vec<String>,
    /// Replicas in a cluster.
    #[arg(long, default_value_t = 1)]
    pub(crate) replicas: usize,
    /// How long message ids are remembered to drop re-publishes (JetStream's
    /// default: 2 min).
    #[arg(long, value_parser = humantime::parse_duration, default_value = "2m")]
    pub(crate) duplicate_window: Duration,
    /// How long messages are kept (0: no limit).
    #[arg(long, value_parser = humantime::parse_duration, default_value = "0s")]
    pub(crate) max_age: Duration,
    /// File or memory storage.
    #[arg(long, value_enum, default_value = "file")]
    pub(crate) storage: Storage,
    /// The processor's lease, which the duplicate window must exceed (the
    /// processor's default: 3 s).
    #[arg(long, value_parser = humantime::parse_duration, default_value = "3s")]
    pub(crate) lease: Duration,
    #[command(flatten)]
    pub(crate) nats: NatsArgs,
}

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
    pub(crate) consumer: Option<String>,
    /// The dead-letter subject, for a consumer with
    /// `DeadLetterPolicy::publish_to`.
    #[arg(long, conflicts_with = "consumer")]
    pub(crate) subject: Option<String>,
    #[command(flatten)]
    pub(crate) nats: NatsArgs,
}

/// Where NATS is and how to authenticate. `Debug` hides the secrets.
#[derive(Args)]
pub(crate) struct NatsArgs {
    /// The NATS server(s), comma-separated.
    #[arg(long, env = "NATS_URL")]
    pub(crate) nats_url: Option<String>,
    /// A `.creds` file (JWT and nkey seed).
    #[arg(long, env = "NATS_CREDS", conflicts_with_all = ["nats_nkey", "nats_token", "nats_user"])]
    pub(crate) nats_creds: Option<PathBuf>,
    /// An nkey seed.
    #[arg(long, env = "NATS_NKEY", hide_env_values = true, conflicts_with_all = ["nats_token", "nats_user"])]
    pub(crate) nats_nkey: Option<String>,
    /// A token.
    #[arg(
        long,
        env = "NATS_TOKEN",
        hide_env_values = true,
        conflicts_with = "nats_user"
    )]
    pub(crate) nats_token: Option<String>,
    /// A user (with --nats-password).
    #[arg(long, env = "NATS_USER", requires = "nats_password")]
    pub(crate) nats_user: Option<String>,
    /// The user's password.
    #[arg(
        long,
        env = "NATS_PASSWORD",
        hide_env_values = true,
        requires = "nats_user"
    )]
    pub(crate) nats_password: Option<String>,
    /// Require TLS.
    #[arg(long)]
    pub(crate) nats_tls: bool,
    /// Extra CA certificates (PEM) to verify the server with.
    #[arg(long, env = "NATS_CA")]
    pub(crate) nats_ca: Option<PathBuf>,
    /// A client certificate (PEM), for mutual TLS (with --nats-key).
    #[arg(long, env = "NATS_CERT", requires = "nats_key")]
    pub(crate) nats_cert: Option<PathBuf>,
    /// The client certificate's key (PEM).
    #[arg(long, env = "NATS_KEY", requires = "nats_cert")]
    pub(crate) nats_key: Option<PathBuf>,
}

impl std::fmt::Debug for NatsArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let hidden = |secret: &Option<String>| secret.as_ref().map(|_| REDACTED);
        f.debug_struct("NatsArgs")
            .field("nats_url", &self.nats_url.as_deref().map(redact_url))
            .field("nats_creds", &self.nats_creds)
            .field("nats_nkey", &hidden(&self.nats_nkey))
            .field("nats_token", &hidden(&self.nats_token))
            .field("nats_user", &self.nats_user)
            .field("nats_password", &hidden(&self.nats_password))
            .field("nats_tls", &self.nats_tls)
            .field("nats_ca", &self.nats_ca)
            .field("nats_cert", &self.nats_cert)
            .field("nats_key", &self.nats_key)
            .finish()
    }
}
