//! What differs between PostgreSQL, MySQL/MariaDB and SQLite: placeholders,
//! the database clock, column types and how times are read back.

use chrono::{DateTime, NaiveDateTime, Utc};
use sea_orm::{DbBackend, DbErr, QueryResult, Statement, Value};

/// One of the three supported backends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dialect {
    Postgres,
    MySql,
    Sqlite,
}

/// SQLite keeps times as text in this one format, written only by SQL, so
/// comparisons of the text agree with comparisons of the times.
const SQLITE_TIME: &str = "%Y-%m-%d %H:%M:%S%.f";

impl Dialect {
    pub(crate) fn of(backend: DbBackend) -> Self {
        match backend {
            DbBackend::Postgres => Dialect::Postgres,
            DbBackend::MySql => Dialect::MySql,
            _ => Dialect::Sqlite,
        }
    }

    pub(crate) fn backend(self) -> DbBackend {
        match self {
            Dialect::Postgres => DbBackend::Postgres,
            Dialect::MySql => DbBackend::MySql,
            Dialect::Sqlite => DbBackend::Sqlite,
        }
    }

    /// The database clock, as an SQL expression of the time column type.
    pub(crate) fn now(self) -> &'static str {
        match self {
            Dialect::Postgres => "now()",
            Dialect::MySql => "UTC_TIMESTAMP(6)",
            Dialect::Sqlite => "strftime('%Y-%m-%d %H:%M:%f', 'now')",
        }
    }

    /// `now() + <placeholder> milliseconds`; the placeholder is bound to an i64.
    pub(crate) fn now_plus_millis(self, placeholder: &str) -> String {
        match self {
            Dialect::Postgres => format!("(now() + {placeholder} * interval '1 millisecond')"),
            Dialect::MySql => {
                format!("TIMESTAMPADD(MICROSECOND, {placeholder} * 1000, UTC_TIMESTAMP(6))")
            }
            Dialect::Sqlite => format!(
                "strftime('%Y-%m-%d %H:%M:%f', 'now', ({placeholder} / 1000.0) || ' seconds')"
            ),
        }
    }

    /// A time bound as a parameter, converted to the time column type.
    pub(crate) fn time_value(self, time: DateTime<Utc>) -> Value {
        match self {
            Dialect::Postgres => time.into(),
            Dialect::MySql => time.naive_utc().into(),
            Dialect::Sqlite => time.format("%Y-%m-%d %H:%M:%S%.3f").to_string().into(),
        }
    }

    /// Reads a time column back.
    pub(crate) fn time(self, row: &QueryResult, column: &str) -> Result<DateTime<Utc>, DbErr> {
        match self {
            Dialect::Postgres => row.try_get("", column),
            Dialect::MySql => Ok(row.try_get::<NaiveDateTime>("", column)?.and_utc()),
            Dialect::Sqlite => {
                let text: String = row.try_get("", column)?;
                NaiveDateTime::parse_from_str(&text, SQLITE_TIME)
                    .map(|t| t.and_utc())
                    .map_err(|e| DbErr::Type(format!("column `{column}`: `{text}`: {e}")))
            }
        }
    }

    /// Reads a nullable time column back.
    pub(crate) fn time_opt(
        self,
        row: &QueryResult,
        column: &str,
    ) -> Result<Option<DateTime<Utc>>, DbErr> {
        match self {
            Dialect::Postgres => row.try_get("", column),
            Dialect::MySql => Ok(row
                .try_get::<Option<NaiveDateTime>>("", column)?
                .map(|t| t.and_utc())),
            Dialect::Sqlite => match row.try_get::<Option<String>>("", column)? {
                None => Ok(None),
                Some(text) => NaiveDateTime::parse_from_str(&text, SQLITE_TIME)
                    .map(|t| Some(t.and_utc()))
                    .map_err(|e| DbErr::Type(format!("column `{column}`: `{text}`: {e}"))),
            },
        }
    }

    /// Quotes an identifier that has already been validated.
    pub(crate) fn quote(self, ident: &str) -> String {
        match self {
            Dialect::MySql => format!("`{ident}`"),
            _ => format!("\"{ident}\""),
        }
    }

    /// `UPDATE table` for a statement that names its rows by primary key
    /// (`id IN (…)`). MySQL/MariaDB get `FORCE INDEX (PRIMARY)`: left to
    /// choose, the optimizer may read a small table through a secondary
    /// index (`status`, …), and InnoDB locks, and waits for, every row it
    /// reads, rows the statement does not change among them (a writer's
    /// uncommitted insert, a row another transaction holds).
    pub(crate) fn update_by_id(self, table: &str) -> String {
        match self {
            Dialect::MySql => format!("UPDATE {table} FORCE INDEX (PRIMARY)"),
            _ => format!("UPDATE {table}"),
        }
    }

    /// `DELETE FROM table` for a statement that names its rows by primary
    /// key; on MySQL/MariaDB with `FORCE INDEX (PRIMARY)`, as
    /// [`update_by_id`](Self::update_by_id) (their single-table `DELETE`
    /// takes no index hint; the multi-table form does).
    pub(crate) fn delete_by_id(self, table: &str) -> String {
        match self {
            Dialect::MySql => format!("DELETE {table} FROM {table} FORCE INDEX (PRIMARY)"),
            _ => format!("DELETE FROM {table}"),
        }
    }

    /// `IF NOT EXISTS ` where `CREATE INDEX` takes it (MySQL's does not:
    /// migrations there create an index once, with its table).
    pub(crate) fn index_if_not_exists(self) -> &'static str {
        match self {
            Dialect::MySql => "",
            _ => "IF NOT EXISTS ",
        }
    }
}

/// An SQL statement being built, with placeholders in the dialect's style.
pub(crate) struct Sql {
    dialect: Dialect,
    text: String,
    values: Vec<Value>,
}

impl Sql {
    pub(crate) fn new(dialect: Dialect) -> Self {
        Self {
            dialect,
            text: String::new(),
            values: Vec::new(),
        }
    }

    /// Starts a statement that embeds `statement`: returns a builder already
    /// holding its values (placeholders bound next are numbered after them)
    /// and its text, to splice in where it belongs.
    pub(crate) fn embedding(statement: Statement) -> (Self, String) {
        let sql = Self {
            dialect: Dialect::of(statement.db_backend),
            text: String::new(),
            values: statement.values.map(|values| values.0).unwrap_or_default(),
        };
        (sql, statement.sql)
    }

    pub(crate) fn dialect(&self) -> Dialect {
        self.dialect
    }

    /// Appends SQL text.
    pub(crate) fn push(&mut self, text: &str) -> &mut Self {
        self.text.push_str(text);
        self
    }

    /// Binds a value and returns its placeholder, to splice into text.
    pub(crate) fn param(&mut self, value: impl Into<Value>) -> String {
        self.values.push(value.into());
        match self.dialect {
            Dialect::Postgres => format!("${}", self.values.len()),
            _ => "?".to_owned(),
        }
    }

    /// Binds a value and appends its placeholder.
    pub(crate) fn bind(&mut self, value: impl Into<Value>) -> &mut Self {
        let placeholder = self.param(value);
        self.text.push_str(&placeholder);
        self
    }

    /// Appends `(p1, p2, ...)` for a list of values.
    pub(crate) fn bind_list<V: Into<Value>>(
        &mut self,
        values: impl IntoIterator<Item = V>,
    ) -> &mut Self {
        self.push("(");
        for (i, value) in values.into_iter().enumerate() {
            if i > 0 {
                self.push(", ");
            }
            self.bind(value);
        }
        self.push(")")
    }

    /// Binds a PostgreSQL array of `kind` and returns its placeholder.
    pub(crate) fn param_array(
        &mut self,
        kind: sea_orm::sea_query::ArrayType,
        values: impl IntoIterator<Item = Value>,
    ) -> String {
        self.param(Value::Array(
            kind,
            Some(Box::new(values.into_iter().collect())),
        ))
    }

    /// Appends `<column> IN (…)` over `ids`. On PostgreSQL it is
    /// `<column> = ANY($n)` with one array parameter: the statement's text,
    /// so its prepared statement and plan, is then the same for any number
    /// of ids.
    pub(crate) fn bind_ids(
        &mut self,
        column: &str,
        ids: impl IntoIterator<Item = uuid::Uuid>,
    ) -> &mut Self {
        if self.dialect == Dialect::Postgres {
            let array = self.param_array(
                sea_orm::sea_query::ArrayType::Uuid,
                ids.into_iter().map(Value::from),
            );
            return self.push(&format!("{column} = ANY({array})"));
        }
        self.push(&format!("{column} IN ")).bind_list(ids)
    }

    pub(crate) fn build(self) -> Statement {
        Statement::from_sql_and_values(self.dialect.backend(), self.text, self.values)
    }
}

impl Dialect {
    /// A placeholder for JSON text, cast to the JSON column type where needed.
    pub(crate) fn json_param(self, placeholder: &str) -> String {
        match self {
            Dialect::Postgres => format!("CAST({placeholder} AS jsonb)"),
            _ => placeholder.to_owned(),
        }
    }

    /// A JSON column read back as text.
    pub(crate) fn json_text(self, column: &str) -> String {
        match self {
            Dialect::Postgres => format!("{column}::text"),
            Dialect::MySql => format!("CAST({column} AS CHAR)"),
            Dialect::Sqlite => column.to_owned(),
        }
    }
}

/// PostgreSQL: a one-row subquery that, joined into a statement, makes the
/// statement's own transaction commit asynchronously (see
/// [`SeaOrmOutboxStore`](crate::SeaOrmOutboxStore); wake-up `NOTIFY`s commit
/// so too). `set_config` is volatile, so the planner keeps and runs it.
pub(crate) const ASYNC_COMMIT: &str =
    "(SELECT set_config('synchronous_commit', 'off', true)) AS async_commit";

/// A duration in whole milliseconds, as SQL parameters take it.
pub(crate) fn millis(duration: std::time::Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}
