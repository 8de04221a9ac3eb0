//! Which answer an error gets: the SeaORM outbox's errors (with the
//! `sea-orm` feature) found anywhere in the error's chain, else a 500.

use std::error::Error;

use axum::http::StatusCode;

/// The status, body and `Retry-After` an error is answered with.
pub(crate) struct Answer {
    pub(crate) status: StatusCode,
    pub(crate) message: String,
    pub(crate) retry_after: Option<u32>,
}

impl Answer {
    fn internal() -> Self {
        Self {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            message: "internal error".to_owned(),
            retry_after: None,
        }
    }
}

/// The answer to `err`: the first error of its chain the outbox knows.
pub(crate) fn answer(err: &(dyn Error + 'static)) -> Answer {
    let mut next = Some(err);
    while let Some(err) = next {
        if let Some(answer) = known(err) {
            return answer;
        }
        next = err.source();
    }
    Answer::internal()
}

#[cfg(feature = "sea-orm")]
fn known(err: &(dyn Error + 'static)) -> Option<Answer> {
    use txoutbox_sea_orm::OutboxError;

    let err = err.downcast_ref::<OutboxError>()?;
    Some(match err {
        OutboxError::ConcurrencyConflict {
            aggregate_type,
            aggregate_id,
            ..
        } => Answer {
            status: StatusCode::CONFLICT,
            message: format!(
                "conflict: {aggregate_type} {aggregate_id} was changed by another request; \
                 reload it and try again"
            ),
            retry_after: None,
        },
        OutboxError::Contention(_) => Answer {
            status: StatusCode::SERVICE_UNAVAILABLE,
            message: "database busy; try again".to_owned(),
            retry_after: Some(1),
        },
        err if err.is_unavailable() => Answer {
            status: StatusCode::SERVICE_UNAVAILABLE,
            message: "database unavailable; try again".to_owned(),
            retry_after: Some(5),
        },
        _ => Answer::internal(),
    })
}

#[cfg(not(feature = "sea-orm"))]
fn known(_: &(dyn Error + 'static)) -> Option<Answer> {
    None
}

#[cfg(all(test, feature = "sea-orm"))]
mod tests {
    use txoutbox_sea_orm::OutboxError;

    use super::*;

    fn conflict() -> OutboxError {
        OutboxError::ConcurrencyConflict {
            aggregate_type: "order",
            aggregate_id: "o-1".to_owned(),
            expected_version: 3,
        }
    }

    #[test]
    fn a_conflict_is_a_409_naming_the_aggregate() {
        let answer = answer(&conflict());
        assert_eq!(answer.status, StatusCode::CONFLICT);
        assert!(answer.message.contains("order o-1"), "{}", answer.message);
        assert_eq!(answer.retry_after, None);
    }

    #[test]
    fn a_conflict_inside_another_error_is_found() {
        #[derive(Debug, thiserror::Error)]
        #[error("placing the order")]
        struct Placing(#[source] OutboxError);
        assert_eq!(answer(&Placing(conflict())).status, StatusCode::CONFLICT);
    }

    #[test]
    fn a_database_away_is_a_503_to_retry() {
        use txoutbox_sea_orm::sea_orm::{ConnAcquireErr, DbErr};
        let away = OutboxError::Db(DbErr::ConnectionAcquire(ConnAcquireErr::Timeout));
        assert!(away.is_unavailable());
        let answer = answer(&away);
        assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(answer.retry_after, Some(5));
    }

    #[test]
    fn other_outbox_errors_are_500s() {
        let answer = answer(&OutboxError::InvalidConfig("x".to_owned()));
        assert_eq!(answer.status, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(answer.message, "internal error");
    }
}
