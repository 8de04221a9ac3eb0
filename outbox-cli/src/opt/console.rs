//! The arguments of `outbox console`. Part of the command line in `opt`.

use std::net::SocketAddr;

use clap::Args;

use super::broker::NatsArgs;

/// `outbox console`.
#[derive(Debug, Args)]
pub(crate) struct ConsoleArgs {
    /// Where to listen (a loopback address unless --allow-public).
    #[arg(long, default_value = "127.0.0.1:8089")]
    pub(crate) listen: SocketAddr,
    /// Listen on an address other than loopback: whoever reaches it reads
    /// the outbox (and, with --allow-changes, changes it). Put it behind
    /// authentication first.
    #[arg(long)]
    pub(crate) allow_public: bool,
    /// Let the console requeue and skip dead messages, release held
    /// aggregates and run verify, all recorded as --operator. Without it,
    /// read-only.
    #[arg(long)]
    pub(crate) allow_changes: bool,
    /// Who the changes are recorded as (default: $USER@host).
    #[arg(long, requires = "allow_changes")]
    pub(crate) operator: Option<String>,
    /// The stream the outbox publishes to: verify reads it, and the
    /// consumers' lag is read on it.
    #[arg(long)]
    pub(crate) stream: Option<String>,
    /// A consumer to show (its durable name, the inbox's consumer name):
    /// its lag and held aggregates. Repeat for more.
    #[arg(long = "consumer", value_name = "NAME")]
    pub(crate) consumers: Vec<String>,
    #[command(flatten)]
    pub(crate) nats: NatsArgs,
}
