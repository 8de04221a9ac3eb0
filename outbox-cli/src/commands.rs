//! The command line and what each command does.

use clap::{Args, Parser, Subcommand};
use outbox_core::{DeadSelector, MessageId, OutboxStore, Release, StoreError};
use outbox_sea_orm::{Inbox, Outbox, OutboxConfig, OutboxError};

use crate::render;

/// The operator's view of a transactional outbox and its consumers' inboxes.
#[derive(Debug, Parser)]
#[command(name = "outbox", version, about, long_about = None)]
pub(crate) struct Cli {
    #[command(flatten)]
    pub(crate) target: Target,
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// Where the outbox is.
#[derive(Debug, Args)]
pub(crate) struct Target {
    /// The database (postgres://, mysql://, sqlite://).
    #[arg(long, env = "DATABASE_URL", global = true, hide_env_values = true)]
    pub(crate) database_url: Option<String>,
    /// The outbox table.
    #[arg(long, default_value = "outbox_messages", global = true)]
    pub(crate) table: String,
    /// The inbox table.
    #[arg(long, default_value = "outbox_inbox", global = true)]
    pub(crate) inbox_table: String,
    /// Print JSON instead of text (read commands).
    #[arg(long, global = true)]
    pub(crate) json: bool,
}

/// What to do.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Pending, leased and dead messages, the oldest pending age, per event.
    Status,
    /// Messages that will not be retried.
    #[command(subcommand)]
    Dead(Dead),
    /// A consumer's aggregates held behind a message it could not apply.
    Holds {
        /// The consumer (its durable name, the inbox's consumer name).
        #[arg(long)]
        consumer: String,
    },
    /// Lets a held aggregate go on: its subscriber applies the message it is
    /// held behind again (or skips it with --skip), then what is parked.
    Release {
        /// The consumer.
        #[arg(long)]
        consumer: String,
        /// The aggregate type.
        aggregate_type: String,
        /// The aggregate id.
        aggregate_id: String,
        /// Leave the message it is held behind unapplied for good.
        #[arg(long)]
        skip: bool,
        /// Do it (without it, print what would be done).
        #[arg(long)]
        yes: bool,
    },
    /// verify, stream, dlq: the commands that reach NATS.
    #[command(flatten)]
    Broker(Box<crate::broker::BrokerCommand>),
}

/// Dead messages.
#[derive(Debug, Subcommand)]
pub(crate) enum Dead {
    /// The oldest dead messages, why, and what waits behind each.
    List {
        /// How many.
        #[arg(long, default_value_t = 50)]
        limit: u32,
    },
    /// Puts dead messages back to pending, attempts reset.
    Requeue {
        /// These messages.
        ids: Vec<MessageId>,
        /// Every dead message of this event name.
        #[arg(long, conflicts_with_all = ["ids", "all"])]
        event: Option<String>,
        /// Every dead message.
        #[arg(long, conflicts_with = "ids")]
        all: bool,
        /// Do it (without it, print what would be done).
        #[arg(long)]
        yes: bool,
    },
}

/// Why a command failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CliError {
    /// Bad arguments or settings.
    #[error("{0}")]
    Usage(String),
    /// The database could not be reached.
    #[error("connecting to the database: {0}")]
    Connect(#[source] sea_orm::DbErr),
    /// The outbox refused.
    #[error(transparent)]
    Outbox(#[from] OutboxError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A broker command failed.
    #[error(transparent)]
    Broker(#[from] crate::broker::BrokerError),
}

/// Runs `cli`; returns what to print.
pub(crate) async fn run(cli: Cli) -> Result<String, CliError> {
    let Cli { target, command } = cli;
    if let Command::Broker(command) = command {
        return crate::broker::run(*command, &target).await;
    }
    let outbox = connect(&target).await?;
    let json = target.json;
    match command {
        // Dispatched above, before connecting to the database.
        Command::Broker(command) => crate::broker::run(*command, &target).await,
        Command::Status => Ok(render::stats(&outbox.store().stats().await?, json)),
        Command::Dead(Dead::List { limit }) => Ok(render::dead(
            &outbox.store().dead_messages(limit).await?,
            json,
        )),
        Command::Dead(Dead::Requeue {
            ids,
            event,
            all,
            yes,
        }) => {
            let selector = match (ids.is_empty(), event, all) {
                (_, Some(event), _) => DeadSelector::EventName(event),
                (true, None, true) => DeadSelector::All,
                (false, None, false) => DeadSelector::Ids(ids),
                _ => {
                    return Err(CliError::Usage(
                        "name the messages: IDs, --event NAME or --all".to_owned(),
                    ));
                }
            };
            if !yes {
                return Ok(format!(
                    "would requeue the dead messages selected by {selector:?}; add --yes to do it\n"
                ));
            }
            let requeued = outbox.store().requeue_dead(selector).await?;
            Ok(format!("requeued {requeued} dead message(s)\n"))
        }
        Command::Holds { consumer } => {
            let inbox = Inbox::new(&outbox, consumer)?;
            Ok(render::holds(&inbox.holds().await?, json))
        }
        Command::Release {
            consumer,
            aggregate_type,
            aggregate_id,
            skip,
            yes,
        } => {
            let how = if skip { Release::Skip } else { Release::Retry };
            if !yes {
                return Ok(format!(
                    "would release {aggregate_type}/{aggregate_id} of consumer {consumer} ({}); \
                     add --yes to do it\n",
                    how.as_str()
                ));
            }
            let inbox = Inbox::new(&outbox, consumer)?;
            if inbox.release(&aggregate_type, &aggregate_id, how).await? {
                Ok(format!(
                    "released {aggregate_type}/{aggregate_id} ({}): its subscriber applies what \
                     is parked within a second\n",
                    how.as_str()
                ))
            } else {
                Err(CliError::Usage(format!(
                    "{aggregate_type}/{aggregate_id} is not held for this consumer"
                )))
            }
        }
    }
}

/// Connects to the outbox `target` names.
pub(crate) async fn connect(target: &Target) -> Result<Outbox, CliError> {
    let url = target
        .database_url
        .as_deref()
        .ok_or_else(|| CliError::Usage("set DATABASE_URL or --database-url".to_owned()))?;
    let config = OutboxConfig::default()
        .with_table(&target.table)?
        .with_inbox_table(&target.inbox_table)?;
    let mut options = sea_orm::ConnectOptions::new(url);
    options
        .connect_timeout(std::time::Duration::from_secs(5))
        .acquire_timeout(std::time::Duration::from_secs(5))
        .max_connections(2)
        .sqlx_logging(false);
    let db = sea_orm::Database::connect(options)
        .await
        .map_err(CliError::Connect)?;
    Ok(Outbox::new(db, config.without_notify()))
}
