//! Connecting to NATS: the options every broker command shares, mapped onto
//! `txoutbox_nats::NatsConnect` (credentials file, nkey, token,
//! user/password, TLS).

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use txoutbox_core::redact::{REDACTED, redact_url};
use txoutbox_nats::async_nats::jetstream;
use txoutbox_nats::{Auth, NatsConnect, Tls};

use crate::broker::BrokerError;

/// Where NATS is and how to authenticate. `Debug` hides the secrets.
#[derive(Args)]
pub(crate) struct NatsArgs {
    /// The NATS server(s), comma-separated.
    #[arg(long, env = "NATS_URL")]
    nats_url: Option<String>,
    /// A `.creds` file (JWT and nkey seed).
    #[arg(long, env = "NATS_CREDS", conflicts_with_all = ["nats_nkey", "nats_token", "nats_user"])]
    nats_creds: Option<PathBuf>,
    /// An nkey seed.
    #[arg(long, env = "NATS_NKEY", hide_env_values = true, conflicts_with_all = ["nats_token", "nats_user"])]
    nats_nkey: Option<String>,
    /// A token.
    #[arg(
        long,
        env = "NATS_TOKEN",
        hide_env_values = true,
        conflicts_with = "nats_user"
    )]
    nats_token: Option<String>,
    /// A user (with --nats-password).
    #[arg(long, env = "NATS_USER", requires = "nats_password")]
    nats_user: Option<String>,
    /// The user's password.
    #[arg(
        long,
        env = "NATS_PASSWORD",
        hide_env_values = true,
        requires = "nats_user"
    )]
    nats_password: Option<String>,
    /// Require TLS.
    #[arg(long)]
    nats_tls: bool,
    /// Extra CA certificates (PEM) to verify the server with.
    #[arg(long, env = "NATS_CA")]
    nats_ca: Option<PathBuf>,
    /// A client certificate (PEM), for mutual TLS (with --nats-key).
    #[arg(long, env = "NATS_CERT", requires = "nats_key")]
    nats_cert: Option<PathBuf>,
    /// The client certificate's key (PEM).
    #[arg(long, env = "NATS_KEY", requires = "nats_cert")]
    nats_key: Option<PathBuf>,
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

impl NatsArgs {
    /// Connects (one attempt, 5 s at most) and returns JetStream.
    pub(crate) async fn jetstream(&self) -> Result<jetstream::Context, BrokerError> {
        let url = self
            .nats_url
            .clone()
            .ok_or_else(|| BrokerError::Usage("set NATS_URL or --nats-url".to_owned()))?;
        let auth = if let Some(path) = &self.nats_creds {
            Auth::CredentialsFile(path.clone())
        } else if let Some(seed) = &self.nats_nkey {
            Auth::NKey(seed.clone())
        } else if let Some(token) = &self.nats_token {
            Auth::Token(token.clone())
        } else if let (Some(user), Some(password)) = (&self.nats_user, &self.nats_password) {
            Auth::UserPassword {
                user: user.clone(),
                password: password.clone(),
            }
        } else {
            Auth::None
        };
        let mut tls = Tls::default();
        if self.nats_tls {
            tls = tls.required();
        }
        if let Some(ca) = &self.nats_ca {
            tls = tls.root_certificates(ca);
        }
        if let (Some(cert), Some(key)) = (&self.nats_cert, &self.nats_key) {
            tls = tls.client_certificate(cert, key);
        }
        let client = NatsConnect::new(url)
            .name("outbox-cli")
            .auth(auth)
            .tls(tls)
            .connection_timeout(Duration::from_secs(5))
            .connect()
            .await?;
        Ok(jetstream::new(client))
    }
}
