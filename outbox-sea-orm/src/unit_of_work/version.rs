//! The aggregate's version column, whatever integer type it has.

use sea_orm::{ActiveModelTrait, EntityTrait, Value};

use crate::aggregate_entity::AggregateEntity;
use crate::error::OutboxError;

/// A version as the BIGINT it is stored as.
pub(super) fn version_value(version: u64) -> Result<i64, OutboxError> {
    i64::try_from(version)
        .map_err(|_| OutboxError::InvalidConfig(format!("version {version} does not fit a BIGINT")))
}

/// Sets the version column, whatever integer type it has.
pub(super) fn set_version<A: AggregateEntity>(
    row: &mut <A::Entity as EntityTrait>::ActiveModel,
    version: u64,
) -> Result<(), OutboxError> {
    let wide = version_value(version)?;
    let column = A::version_column();
    if row.try_set(column, Value::BigInt(Some(wide))).is_ok() {
        return Ok(());
    }
    let narrow = i32::try_from(wide).map_err(|_| {
        OutboxError::InvalidConfig(format!(
            "version {version} does not fit the 32-bit version column"
        ))
    })?;
    row.try_set(column, Value::Int(Some(narrow)))?;
    Ok(())
}

/// Reads the version column of a loaded row.
pub(super) fn read_version(value: Value) -> Result<u64, OutboxError> {
    let version = match value {
        Value::BigInt(Some(v)) => Some(v),
        Value::Int(Some(v)) => Some(i64::from(v)),
        Value::SmallInt(Some(v)) => Some(i64::from(v)),
        Value::BigUnsigned(Some(v)) => i64::try_from(v).ok(),
        Value::Unsigned(Some(v)) => Some(i64::from(v)),
        _ => None,
    };
    version.and_then(|v| u64::try_from(v).ok()).ok_or_else(|| {
        OutboxError::InvalidConfig(format!(
            "version column holds {value:?}, not a non-negative integer"
        ))
    })
}
