//! One isolated database per test, on the machine's real servers: a fresh
//! schema on PostgreSQL, a fresh database on MariaDB/MySQL, a fresh file on
//! SQLite. Dropped when the test ends, even when it panics.
//!
//! Servers come from `OUTBOX_TEST_POSTGRES_URL` (default
//! `postgres://postgres@127.0.0.1:5432/test`) and `OUTBOX_TEST_MYSQL_URL`
//! (default `mysql://root@127.0.0.1:3306/test`).

use std::time::Duration;

use sea_orm::{
    ConnectOptions, ConnectionTrait, Database, DatabaseConnection, DbBackend, QueryResult,
    Statement,
};
use txoutbox_sea_orm::{OutboxConfig, create_schema};

/// A backend under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// PostgreSQL.
    Postgres,
    /// MariaDB / MySQL.
    MySql,
    /// SQLite (a file).
    Sqlite,
}

fn postgres_url() -> String {
    std::env::var("OUTBOX_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

fn mysql_url() -> String {
    std::env::var("OUTBOX_TEST_MYSQL_URL")
        .unwrap_or_else(|_| "mysql://root@127.0.0.1:3306/test".to_owned())
}

/// An isolated database, deleted on drop.
#[derive(Debug)]
pub struct TestDb {
    /// The connection pool to the isolated database.
    pub db: DatabaseConnection,
    backend: Backend,
    name: String,
    url: String,
    _dir: Option<tempfile::TempDir>,
}

impl TestDb {
    /// A fresh, empty database on `backend`.
    ///
    /// # Panics
    /// When the server is unreachable: run `scripts/ensure-services.sh`.
    pub async fn new(backend: Backend) -> Self {
        Self::new_on(backend, None).await
    }

    /// A fresh, empty schema (PostgreSQL) or database (MariaDB) on the
    /// server at `url` (a private server of a fault test), with the outbox
    /// table and the `orders` fixture table.
    pub async fn with_schema_on(backend: Backend, url: &str) -> Self {
        let test = Self::new_on(backend, Some(url.to_owned())).await;
        test.create_schema().await;
        test
    }

    async fn new_on(backend: Backend, server: Option<String>) -> Self {
        let name = format!(
            "outbox_t_{}",
            &uuid::Uuid::now_v7().simple().to_string()[16..]
        );
        let (url, create, dir) = match backend {
            Backend::Postgres => (
                server.unwrap_or_else(postgres_url),
                Some(format!("CREATE SCHEMA {name}")),
                None,
            ),
            Backend::MySql => (
                server.unwrap_or_else(mysql_url),
                Some(format!("CREATE DATABASE {name}")),
                None,
            ),
            Backend::Sqlite => {
                let dir = tempfile::tempdir().expect("temp dir");
                let path = dir.path().join("outbox.sqlite");
                (
                    format!("sqlite://{}?mode=rwc", path.display()),
                    None,
                    Some(dir),
                )
            }
        };
        if let Some(create) = create {
            let admin = Database::connect(&url).await.unwrap_or_else(|e| {
                panic!(
                    "cannot reach {url} ({e}); start the services with scripts/ensure-services.sh"
                )
            });
            admin
                .execute_unprepared(&create)
                .await
                .expect("create the test database");
            admin.close().await.ok();
        }
        let mut test = Self {
            db: DatabaseConnection::default(),
            backend,
            name,
            url,
            _dir: dir,
        };
        test.db = test.connect_again().await;
        if backend == Backend::Sqlite {
            test.db
                .execute_unprepared("PRAGMA journal_mode = WAL")
                .await
                .expect("sqlite WAL");
        }
        test
    }

    /// A fresh database with the outbox table (default config) and the
    /// `orders` fixture table.
    pub async fn with_schema(backend: Backend) -> Self {
        let test = Self::new(backend).await;
        test.create_schema().await;
        test
    }

    async fn create_schema(&self) {
        create_schema(&self.db, &OutboxConfig::default())
            .await
            .expect("outbox schema");
        crate::orders::create_table(&self.db)
            .await
            .expect("orders table");
    }

    /// The backend.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// The SeaORM backend.
    pub fn db_backend(&self) -> DbBackend {
        self.db.get_database_backend()
    }

    /// How another process reaches this database: its URL and, on
    /// PostgreSQL, the schema to put on its `search_path`.
    pub fn location(&self) -> (String, Option<String>) {
        match self.backend {
            Backend::Postgres => (self.url.clone(), Some(self.name.clone())),
            Backend::MySql => {
                let base = self
                    .url
                    .rsplit_once('/')
                    .map_or(self.url.as_str(), |(b, _)| b);
                (format!("{base}/{}", self.name), None)
            }
            Backend::Sqlite => (self.url.clone(), None),
        }
    }

    /// A second, independent pool to the same isolated database.
    pub async fn connect_again(&self) -> DatabaseConnection {
        self.connect_with(10).await
    }

    /// Like [`connect_again`](Self::connect_again), with a pool of at most
    /// `connections` connections (1: every statement on one session).
    pub async fn connect_with(&self, connections: u32) -> DatabaseConnection {
        let (url, schema) = self.location();
        let mut options = ConnectOptions::new(url);
        if let Some(schema) = schema {
            options.set_schema_search_path(schema);
        }
        options.max_connections(connections).sqlx_logging(false);
        Database::connect(options)
            .await
            .expect("connect to the test database")
    }

    /// Counts rows of `table` matching `filter` (an SQL condition, or `1=1`).
    pub async fn count(&self, table: &str, filter: &str) -> i64 {
        self.row(&format!("SELECT COUNT(*) AS n FROM {table} WHERE {filter}"))
            .await
            .try_get("", "n")
            .expect("count")
    }

    /// The rows the query `sql` returns.
    ///
    /// # Panics
    /// When the query fails.
    pub async fn rows(&self, sql: &str) -> Vec<QueryResult> {
        self.db
            .query_all_raw(Statement::from_string(self.db_backend(), sql))
            .await
            .expect("query")
    }

    /// The first row the query `sql` returns.
    ///
    /// # Panics
    /// When the query fails or returns no row.
    pub async fn row(&self, sql: &str) -> QueryResult {
        self.db
            .query_one_raw(Statement::from_string(self.db_backend(), sql))
            .await
            .expect("query")
            .expect("a row")
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        let drop_sql = match self.backend {
            Backend::Postgres => format!("DROP SCHEMA IF EXISTS {} CASCADE", self.name),
            Backend::MySql => format!("DROP DATABASE IF EXISTS {}", self.name),
            Backend::Sqlite => return, // the temp dir goes with `_dir`
        };
        execute_detached(self.url.clone(), drop_sql);
    }
}

/// Runs `sql` on a fresh connection to `url` and waits for it, from code
/// that may be inside a runtime or unwinding (a `Drop`): on a thread of its
/// own with a runtime of its own. Cleanup only: failures are ignored (the
/// schema or database is then left behind, harmlessly).
pub fn execute_detached(url: String, sql: String) {
    let cleanup = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .ok()?;
        runtime.block_on(async {
            let admin = tokio::time::timeout(Duration::from_secs(10), Database::connect(&url))
                .await
                .ok()?
                .ok()?;
            admin.execute_unprepared(&sql).await.ok()?;
            admin.close().await.ok()
        })
    });
    let _ = cleanup.join();
}

/// Runs an async test function once per backend, each in its own isolated
/// database with the outbox and `orders` tables:
///
/// ```ignore
/// async fn commit_writes_state_and_events(test: TestDb) { ... }
/// txoutbox_suite::each_backend!(commit_writes_state_and_events);
/// ```
///
/// With `empty:` first, each function gets the [`Backend`] instead and makes
/// its own (e.g. empty) database, for tests of schema creation:
///
/// ```ignore
/// async fn migrator_creates_the_table(backend: Backend) { ... }
/// txoutbox_suite::each_backend!(empty: migrator_creates_the_table);
/// ```
#[macro_export]
macro_rules! each_backend {
    (empty: $($name:ident),* $(,)?) => {
        $crate::each_backend!(@backends empty_postgres, empty_mysql, empty_sqlite;
            |backend| backend; $($name),*);
    };
    ($($name:ident),* $(,)?) => {
        $crate::each_backend!(@backends postgres, mysql, sqlite;
            |backend| $crate::TestDb::with_schema(backend).await; $($name),*);
    };
    (@backends $pg:ident, $my:ident, $lite:ident; |$b:ident| $arg:expr; $($name:ident),*) => {
        $crate::each_backend!(@one $pg, Postgres; |$b| $arg; $($name),*);
        $crate::each_backend!(@one $my, MySql; |$b| $arg; $($name),*);
        $crate::each_backend!(@one $lite, Sqlite; |$b| $arg; $($name),*);
    };
    (@one $module:ident, $backend:ident; |$b:ident| $arg:expr; $($name:ident),*) => {
        mod $module {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $name() {
                    let $b = $crate::Backend::$backend;
                    super::$name($arg).await
                }
            )*
        }
    };
}

/// Per-backend test wrappers with names of their own: each `name =>
/// Backend` becomes a `#[tokio::test]` (two worker threads) that runs
/// `test(Backend::...)`, for an `async fn test(backend: Backend)` that makes
/// its own setup:
///
/// ```ignore
/// async fn shutdown_leaves_no_lease(backend: Backend) { ... }
/// txoutbox_suite::backend_tests!(shutdown_leaves_no_lease:
///     shutdown_leaves_no_lease_on_postgres => Postgres,
///     shutdown_leaves_no_lease_on_mariadb => MySql,
/// );
/// ```
#[macro_export]
macro_rules! backend_tests {
    ($test:ident: $($name:ident => $backend:ident),+ $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                $test($crate::Backend::$backend).await;
            }
        )+
    };
}

/// A claimed batch as `(aggregate id, sequence)` pairs, sorted: what a test
/// compares with the messages it expects the claim to take.
pub fn claimed_positions(batch: &txoutbox_core::ClaimedBatch) -> Vec<(String, u64)> {
    let mut positions: Vec<(String, u64)> = batch
        .messages
        .iter()
        .map(|c| (c.message.aggregate_id.clone(), c.message.sequence))
        .collect();
    positions.sort();
    positions
}
