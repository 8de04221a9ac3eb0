//! What the commands run against: the targets the command line names,
//! resolved (database URL, tables, `--json`; NATS server and credentials;
//! a consumer's dead-letter subject), and the connections opened to them.
//! Every command gets its outbox, JetStream or dead letters from here.

use std::time::Duration;

use txoutbox_nats::async_nats::jetstream;
use txoutbox_nats::subscriber::dead_letter_replay::DeadLetters;
use txoutbox_nats::{Auth, NatsConnect, Tls};
use txoutbox_sea_orm::{Outbox, OutboxConfig};

use crate::error::CliError;
use crate::opt::{Letters, NatsArgs, Target};

/// The targets the command line names, for the command to connect to.
#[derive(Debug)]
pub(crate) struct Context {
    target: Target,
}

impl Context {
    pub(crate) fn new(target: Target) -> Self {
        Self { target }
    }

    /// Whether to print JSON instead of text.
    pub(crate) fn json(&self) -> bool {
        self.target.json
    }

    /// The outbox the target names: its tables, on a small pool to its
    /// database.
    pub(crate) async fn outbox(&self) -> Result<Outbox, CliError> {
        let target = &self.target;
        let config = OutboxConfig::default()
            .with_table(&target.table)?
            .with_inbox_table(&target.inbox_table)?;
        let url = target
            .database_url
            .as_deref()
            .ok_or_else(|| CliError::Usage("set DATABASE_URL or --database-url".to_owned()))?;
        let db = connect_database(url).await?;
        Ok(Outbox::new(db, config.without_notify()))
    }

    /// JetStream on the NATS server `nats` names (one attempt, 5 s at most).
    pub(crate) async fn jetstream(&self, nats: &NatsArgs) -> Result<jetstream::Context, CliError> {
        let url = nats
            .nats_url
            .clone()
            .ok_or_else(|| CliError::BrokerUsage("set NATS_URL or --nats-url".to_owned()))?;
        let client = NatsConnect::new(url)
            .name("outbox-cli")
            .fail_when_away()
            .auth(auth(nats))
            .tls(tls(nats))
            .connection_timeout(Duration::from_secs(5))
            .connect()
            .await?;
        Ok(jetstream::new(client))
    }

    /// The dead letters `on` names: a consumer's (`dlq.<consumer>`) or a
    /// subject's.
    pub(crate) async fn dead_letters(&self, on: &Letters) -> Result<DeadLetters, CliError> {
        let jetstream = self.jetstream(&on.nats).await?;
        let subject = match (&on.consumer, &on.subject) {
            (_, Some(subject)) => subject.clone(),
            (Some(consumer), None) => format!("dlq.{consumer}"),
            (None, None) => {
                return Err(CliError::BrokerUsage(
                    "name the consumer (--consumer) or the subject (--subject)".to_owned(),
                ));
            }
        };
        Ok(DeadLetters::on_subject(&jetstream, subject).await?)
    }
}

/// A small pool to `url`, failing fast when the database is unreachable.
async fn connect_database(url: &str) -> Result<sea_orm::DatabaseConnection, CliError> {
    let mut options = sea_orm::ConnectOptions::new(url);
    options
        .connect_timeout(Duration::from_secs(5))
        .acquire_timeout(Duration::from_secs(5))
        .max_connections(2)
        .sqlx_logging(false);
    sea_orm::Database::connect(options)
        .await
        .map_err(CliError::Connect)
}

/// How to authenticate to NATS: the first of credentials file, nkey, token,
/// user/password that is given.
fn auth(nats: &NatsArgs) -> Auth {
    if let Some(path) = &nats.nats_creds {
        Auth::CredentialsFile(path.clone())
    } else if let Some(seed) = &nats.nats_nkey {
        Auth::NKey(seed.clone())
    } else if let Some(token) = &nats.nats_token {
        Auth::Token(token.clone())
    } else if let (Some(user), Some(password)) = (&nats.nats_user, &nats.nats_password) {
        Auth::UserPassword {
            user: user.clone(),
            password: password.clone(),
        }
    } else {
        Auth::None
    }
}

/// TLS to NATS: required or not, extra CAs, a client certificate.
fn tls(nats: &NatsArgs) -> Tls {
    let mut tls = Tls::default();
    if nats.nats_tls {
        tls = tls.required();
    }
    if let Some(ca) = &nats.nats_ca {
        tls = tls.root_certificates(ca);
    }
    if let (Some(cert), Some(key)) = (&nats.nats_cert, &nats.nats_key) {
        tls = tls.client_certificate(cert, key);
    }
    tls
}
