//! One aggregate's write (insert, or update/delete filtered on the loaded
//! version) as a statement: run at once in an open transaction, or kept
//! until the unit of work commits.

use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DbBackend, DbErr, EntityTrait, QueryFilter,
    QueryTrait, SqlErr, Statement,
};
use txoutbox_core::AggregateChanges;

use super::version::{set_version, version_value};
use crate::aggregate_entity::AggregateEntity;
use crate::config::TableName;
use crate::error::OutboxError;

/// An aggregate's row change, with what a refusal means.
pub(super) struct AggregateWrite {
    statement: Statement,
    check: WriteCheck,
}

/// What a statement holding an [`AggregateWrite`] means when it applies to
/// no row or is refused.
pub(super) struct WriteCheck {
    /// A new aggregate: a unique violation means it exists already.
    /// Otherwise the statement matches the row only at the loaded version:
    /// no row means it changed since.
    creates: bool,
    aggregate_type: &'static str,
    aggregate_id: String,
    expected_version: u64,
}

impl AggregateWrite {
    /// Inserts the aggregate (version 0) or updates it at its loaded version.
    pub(super) fn save<A: AggregateEntity>(
        aggregate: &A,
        changes: &AggregateChanges,
        backend: DbBackend,
    ) -> Result<Self, OutboxError> {
        // `to_active_model` is the whole state: values a model marked
        // `Unchanged` (e.g. from `into_active_model()`) must be written too.
        let mut row = aggregate.to_active_model().reset_all();
        set_version::<A>(&mut row, changes.new_version)?;
        let creates = changes.expected_version == 0;
        let statement = if creates {
            A::Entity::insert(row).build(backend)
        } else {
            let expected = version_value(changes.expected_version)?;
            A::Entity::update(row)
                .validate()?
                .filter(A::version_column().eq(expected))
                .build(backend)
        };
        Ok(Self::new(statement, creates, changes))
    }

    /// Deletes the aggregate's row at its loaded version.
    pub(super) fn delete<A: AggregateEntity>(
        aggregate: &A,
        changes: &AggregateChanges,
        backend: DbBackend,
    ) -> Result<Self, OutboxError> {
        let expected = version_value(changes.expected_version)?;
        let statement = A::Entity::delete(aggregate.to_active_model())
            .validate()?
            .filter(A::version_column().eq(expected))
            .build(backend);
        Ok(Self::new(statement, false, changes))
    }

    fn new(statement: Statement, creates: bool, changes: &AggregateChanges) -> Self {
        let check = WriteCheck {
            creates,
            aggregate_type: changes.aggregate_type,
            aggregate_id: changes.aggregate_id.clone(),
            expected_version: changes.expected_version,
        };
        Self { statement, check }
    }

    /// Runs the write alone on `db`.
    pub(super) async fn execute(
        self,
        db: &impl ConnectionTrait,
        table: &TableName,
    ) -> Result<(), OutboxError> {
        match db.execute_raw(self.statement).await {
            Ok(result) if result.rows_affected() == 0 => Err(self.check.conflict()),
            Ok(_) => Ok(()),
            Err(err) => Err(self.check.refused(err, table)),
        }
    }

    /// The write as `<statement> RETURNING 1`, for a common table expression
    /// that returns a row only if it applied, and how to read its outcome.
    pub(super) fn returning_a_row(self) -> (Statement, WriteCheck) {
        let mut statement = self.statement;
        statement.sql.push_str(" RETURNING 1");
        (statement, self.check)
    }
}

impl WriteCheck {
    /// The error of a write that did not apply.
    pub(super) fn conflict(&self) -> OutboxError {
        OutboxError::ConcurrencyConflict {
            aggregate_type: self.aggregate_type,
            aggregate_id: self.aggregate_id.clone(),
            expected_version: self.expected_version,
        }
    }

    /// The error of a statement holding this write that the database
    /// refused: a unique violation while creating the aggregate is a
    /// conflict, unless it is the outbox's own `(aggregate, sequence)` index
    /// (an earlier aggregate with this id left messages with these sequences:
    /// reloading would not help).
    pub(super) fn refused(&self, err: DbErr, table: &TableName) -> OutboxError {
        let conflict = match err.sql_err() {
            Some(SqlErr::UniqueConstraintViolation(detail)) => {
                self.creates && !detail.contains(&format!("{}_aggregate", table.as_str()))
            }
            _ => false,
        };
        if conflict {
            self.conflict()
        } else {
            err.into()
        }
    }
}
