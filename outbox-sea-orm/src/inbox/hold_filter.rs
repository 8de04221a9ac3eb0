//! [`HoldFilter`]: which of a consumer's held aggregates a bulk release
//! ([`Inbox::release_all`](super::Inbox::release_all)) takes.

use std::fmt;

use chrono::{DateTime, SecondsFormat, Utc};

/// Which held aggregates of a consumer a bulk release takes: those not
/// released yet that match every condition set (none set: all of them).
///
/// ```
/// use chrono::{Duration, Utc};
/// use txoutbox_sea_orm::inbox::HoldFilter;
///
/// // The orders held for a declined card during the last two hours.
/// let filter = HoldFilter::all()
///     .aggregate_type("order")
///     .reason_contains("card declined")
///     .held_after(Utc::now() - Duration::hours(2));
/// assert_eq!(filter.to_string().split(", ").count(), 3);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HoldFilter {
    aggregate_type: Option<String>,
    reason: Option<String>,
    held_before: Option<DateTime<Utc>>,
    held_after: Option<DateTime<Utc>>,
}

impl HoldFilter {
    /// Every hold not released yet.
    pub fn all() -> Self {
        Self::default()
    }

    /// Only aggregates of this type.
    #[must_use]
    pub fn aggregate_type(mut self, aggregate_type: impl Into<String>) -> Self {
        self.aggregate_type = Some(aggregate_type.into());
        self
    }

    /// Only holds whose reason ([`Hold::reason`](txoutbox_core::consumer::Hold::reason))
    /// contains `text`, ignoring ASCII case (`%` and `_` are plain
    /// characters here).
    #[must_use]
    pub fn reason_contains(mut self, text: impl Into<String>) -> Self {
        self.reason = Some(text.into());
        self
    }

    /// Only aggregates held before `at` (by the database's clock: since
    /// when an aggregate is held is
    /// [`Hold::held_since`](txoutbox_core::consumer::Hold::held_since)).
    #[must_use]
    pub fn held_before(mut self, at: DateTime<Utc>) -> Self {
        self.held_before = Some(at);
        self
    }

    /// Only aggregates held after `at`.
    #[must_use]
    pub fn held_after(mut self, at: DateTime<Utc>) -> Self {
        self.held_after = Some(at);
        self
    }

    /// The aggregate type it keeps, if it names one.
    pub fn aggregate_type_is(&self) -> Option<&str> {
        self.aggregate_type.as_deref()
    }

    /// The text a kept hold's reason contains, if it names one.
    pub fn reason_text(&self) -> Option<&str> {
        self.reason.as_deref()
    }

    /// The time kept holds started before, if it names one.
    pub fn before(&self) -> Option<DateTime<Utc>> {
        self.held_before
    }

    /// The time kept holds started after, if it names one.
    pub fn after(&self) -> Option<DateTime<Utc>> {
        self.held_after
    }

    /// Whether it keeps every hold.
    pub fn is_all(&self) -> bool {
        *self == Self::default()
    }
}

/// `every hold`, or its conditions (`aggregate type order, reason
/// containing "card", held before 2026-11-28T10:00:00Z`): for a
/// confirmation and the audit log.
impl fmt::Display for HoldFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_all() {
            return f.write_str("every hold");
        }
        let time = |at: DateTime<Utc>| at.to_rfc3339_opts(SecondsFormat::Secs, true);
        let parts: Vec<String> = [
            self.aggregate_type
                .as_ref()
                .map(|t| format!("aggregate type {t}")),
            self.reason
                .as_ref()
                .map(|r| format!("reason containing {r:?}")),
            self.held_before
                .map(|at| format!("held before {}", time(at))),
            self.held_after.map(|at| format!("held after {}", time(at))),
        ]
        .into_iter()
        .flatten()
        .collect();
        f.write_str(&parts.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::HoldFilter;

    #[test]
    fn says_what_it_keeps() {
        assert_eq!(HoldFilter::all().to_string(), "every hold");
        let at = chrono::Utc
            .with_ymd_and_hms(2026, 11, 28, 10, 0, 0)
            .unwrap();
        let filter = HoldFilter::all()
            .aggregate_type("order")
            .reason_contains("card")
            .held_before(at);
        assert_eq!(
            filter.to_string(),
            r#"aggregate type order, reason containing "card", held before 2026-11-28T10:00:00Z"#
        );
        assert!(!filter.is_all());
    }
}
