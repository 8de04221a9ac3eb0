//! A private database server of either kind, for fault tests that run on
//! PostgreSQL and MariaDB alike: started, crashed, restarted, frozen and
//! its connections terminated through one type. The PostgreSQL calls that
//! wait for `pg_ctl` run in `block_in_place` (the tests' runtimes are
//! multi-threaded).

use std::sync::{Arc, Mutex};

use crate::Backend;
use crate::private_mariadb::PrivateMariaDb;
use crate::private_postgres::{PrivatePostgres, Shutdown};

/// A private PostgreSQL or MariaDB server.
pub enum PrivateServer {
    /// `initdb` / `pg_ctl` (shared with what [`crash`](Self::crash) returns).
    Postgres(Arc<PrivatePostgres>),
    /// `mariadb-install-db` / `mariadbd`.
    MariaDb(PrivateMariaDb),
}

impl PrivateServer {
    /// Starts a server of `backend`'s kind.
    ///
    /// # Panics
    /// For SQLite, which has no server; when the server does not start.
    pub async fn start(backend: Backend) -> Self {
        match backend {
            Backend::Postgres => Self::Postgres(Arc::new(PrivatePostgres::start())),
            Backend::MySql => Self::MariaDb(PrivateMariaDb::start().await),
            Backend::Sqlite => unreachable!("SQLite has no server"),
        }
    }

    /// Its URL (the database `postgres` or `test`).
    pub fn url(&self) -> String {
        match self {
            Self::Postgres(pg) => pg.url(),
            Self::MariaDb(maria) => maria.url(),
        }
    }

    /// Terminates every client connection; returns how many.
    pub async fn terminate_connections(&self) -> u64 {
        match self {
            Self::Postgres(pg) => pg.terminate_connections().await,
            Self::MariaDb(maria) => maria.terminate_connections().await,
        }
    }

    /// Stops it (`Immediate`: as a crash) and starts it again.
    pub async fn restart(&mut self, mode: Shutdown) {
        match self {
            Self::Postgres(pg) => tokio::task::block_in_place(|| pg.restart(mode)),
            Self::MariaDb(maria) => maria.restart(mode).await,
        }
    }

    /// Stops it (`Immediate`: PostgreSQL `stop -m immediate`, MariaDB
    /// SIGKILL).
    pub fn stop(&mut self, mode: Shutdown) {
        match self {
            Self::Postgres(pg) => tokio::task::block_in_place(|| pg.stop(mode)),
            Self::MariaDb(maria) => maria.stop(mode),
        }
    }

    /// Starts it again after [`stop`](Self::stop) or a [`crash`](Self::crash).
    pub async fn start_again(&mut self) {
        match self {
            Self::Postgres(pg) => tokio::task::block_in_place(|| pg.start_again()),
            Self::MariaDb(maria) => maria.start_again().await,
        }
    }

    /// What crashes it, callable from anywhere (inside a publisher, at the
    /// moment a test chooses); [`start_again`](Self::start_again) restarts it.
    pub fn crash(&self) -> Box<dyn Fn() + Send + Sync> {
        match self {
            Self::Postgres(pg) => {
                let pg = Arc::clone(pg);
                Box::new(move || pg.stop(Shutdown::Immediate))
            }
            Self::MariaDb(maria) => {
                let command = Mutex::new(maria.crash_command());
                Box::new(move || {
                    let status = command.lock().expect("the kill command").status();
                    assert!(status.is_ok_and(|s| s.success()), "mariadbd killed");
                })
            }
        }
    }

    /// Freezes it (SIGSTOP): connections stay open, nothing answers.
    pub fn freeze(&self) {
        match self {
            Self::Postgres(pg) => pg.freeze(),
            Self::MariaDb(maria) => maria.freeze(),
        }
    }

    /// Continues it after [`freeze`](Self::freeze).
    pub fn thaw(&self) {
        match self {
            Self::Postgres(pg) => pg.thaw(),
            Self::MariaDb(maria) => maria.thaw(),
        }
    }
}
