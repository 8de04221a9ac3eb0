//! The arguments of `outbox release`: one held aggregate, or with `--all`
//! every one a filter keeps. Part of the command line in `opt`.

use std::time::Duration;

use chrono::{DateTime, Utc};
use clap::Args;

/// `outbox release`.
#[derive(Debug, Args)]
pub(crate) struct ReleaseArgs {
    /// The consumer.
    #[arg(long)]
    pub(crate) consumer: String,
    /// The aggregate type.
    #[arg(required_unless_present = "all", conflicts_with = "all")]
    pub(crate) aggregate_type: Option<String>,
    /// The aggregate id.
    #[arg(required_unless_present = "all", conflicts_with = "all")]
    pub(crate) aggregate_id: Option<String>,
    /// Leave the message each aggregate is held behind unapplied for good.
    #[arg(long)]
    pub(crate) skip: bool,
    /// Every held aggregate of the consumer not released yet (narrowed by
    /// the filters below), oldest hold first.
    #[arg(long)]
    pub(crate) all: bool,
    #[command(flatten)]
    pub(crate) filter: ReleaseFilter,
    /// Holds released per UPDATE statement (with --all).
    #[arg(long, default_value_t = 100, requires = "all")]
    pub(crate) batch_size: u32,
    /// Do it without asking.
    #[arg(long, short)]
    pub(crate) yes: bool,
}

/// Which holds `release --all` takes.
#[derive(Debug, Args)]
pub(crate) struct ReleaseFilter {
    /// Only aggregates of this type (with --all).
    #[arg(
        long = "aggregate-type",
        id = "filter_aggregate_type",
        value_name = "TYPE",
        requires = "all"
    )]
    pub(crate) aggregate_type: Option<String>,
    /// Only holds whose reason contains TEXT, ignoring case (with --all).
    #[arg(long, value_name = "TEXT", requires = "all")]
    pub(crate) reason: Option<String>,
    /// Only aggregates held before WHEN: an age (`2h`: held more than two
    /// hours ago) or a time (`2026-11-28T09:00:00Z`) (with --all).
    #[arg(long, value_name = "WHEN", value_parser = parse_when, requires = "all")]
    pub(crate) held_before: Option<When>,
    /// Only aggregates held after WHEN: an age (`30min`: held during the
    /// last 30 minutes) or a time (with --all).
    #[arg(long, value_name = "WHEN", value_parser = parse_when, requires = "all")]
    pub(crate) held_after: Option<When>,
}

/// A moment named on the command line: an age or a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum When {
    /// That long before now.
    Ago(Duration),
    /// That time.
    At(DateTime<Utc>),
}

impl When {
    /// The moment, an age counted back from `now`.
    pub(crate) fn resolve(self, now: DateTime<Utc>) -> DateTime<Utc> {
        match self {
            Self::At(at) => at,
            Self::Ago(age) => chrono::Duration::from_std(age)
                .ok()
                .and_then(|age| now.checked_sub_signed(age))
                .unwrap_or(DateTime::<Utc>::MIN_UTC),
        }
    }
}

/// `2h`, `90min`, `7d` (an age) or an RFC 3339 time.
fn parse_when(text: &str) -> Result<When, String> {
    if let Ok(age) = humantime::parse_duration(text) {
        return Ok(When::Ago(age));
    }
    DateTime::parse_from_rfc3339(text)
        .map(|at| When::At(at.with_timezone(&Utc)))
        .map_err(|_| {
            format!("{text:?} is neither an age (2h, 90min, 7d) nor a time (2026-11-28T09:00:00Z)")
        })
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::{When, parse_when};

    #[test]
    fn an_age_or_a_time() {
        let now = chrono::Utc
            .with_ymd_and_hms(2026, 11, 28, 12, 0, 0)
            .unwrap();
        let two_hours_ago = chrono::Utc
            .with_ymd_and_hms(2026, 11, 28, 10, 0, 0)
            .unwrap();
        assert_eq!(parse_when("2h").unwrap().resolve(now), two_hours_ago);
        assert_eq!(
            parse_when("2026-11-28T11:00:00+01:00").unwrap(),
            When::At(two_hours_ago)
        );
        assert!(parse_when("yesterday").unwrap_err().contains("neither"));
    }
}
