//! A subscriber that owns a set of partitions of a partitioned stream (see
//! [`SubscriberBuilder::partitions`](crate::subscriber::SubscriberBuilder::partitions)):
//! one durable pull consumer per owned partition, `<durable>-p<k>`,
//! filtering `<prefix>.p<k>.>`.

use txoutbox_core::Partitions;

use crate::subscriber::config::SubscriberBuildError;

/// The partitions a subscriber owns, and where their messages are.
#[derive(Debug, Clone)]
pub(crate) struct Owned {
    /// The writers' subject prefix.
    pub(crate) prefix: String,
    /// How many partitions the writers split the stream into.
    pub(crate) partitions: Partitions,
    /// The partitions this subscriber consumes, each once, ascending.
    pub(crate) owned: Vec<u16>,
}

/// One durable consumer the subscriber reads: its name and filter subject.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PullSpec {
    /// The durable name.
    pub(crate) durable: String,
    /// The filter subject (empty: every subject of the stream).
    pub(crate) filter: String,
}

impl Owned {
    /// The settings, as given: the owned set sorted, duplicates dropped.
    pub(crate) fn new(prefix: String, partitions: Partitions, owned: Vec<u16>) -> Self {
        let mut owned = owned;
        owned.sort_unstable();
        owned.dedup();
        Self {
            prefix,
            partitions,
            owned,
        }
    }

    /// Checks the settings against each other and the builder's filter
    /// subject.
    pub(crate) fn check(&self, filter_subject: &str) -> Result<(), SubscriberBuildError> {
        let invalid = |what: String| Err(SubscriberBuildError::InvalidConfig(what));
        if !filter_subject.is_empty() {
            return invalid(format!(
                "filter_subject `{filter_subject}` and partitions exclude each other: each owned \
                 partition's consumer filters `{}.p<k>.>`",
                self.prefix
            ));
        }
        if txoutbox_core::SubjectPrefix::new(self.prefix.clone()).is_err() {
            return invalid(format!(
                "the partitions' subject prefix `{}` is not a valid subject prefix",
                self.prefix
            ));
        }
        if self.owned.is_empty() {
            return invalid("the set of owned partitions is empty".into());
        }
        if let Some(outside) = self.owned.iter().find(|k| **k >= self.partitions.count()) {
            return invalid(format!(
                "owned partition {outside} is out of range: there are {}, numbered from 0",
                self.partitions
            ));
        }
        Ok(())
    }

    /// The consumers to read, one per owned partition.
    pub(crate) fn pulls(&self, durable: &str) -> Vec<PullSpec> {
        self.owned
            .iter()
            .map(|&k| PullSpec {
                durable: format!("{durable}-p{k}"),
                filter: Partitions::filter(&self.prefix, k),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use txoutbox_core::Partitions;

    use super::{Owned, PullSpec};
    use crate::subscriber::SubscriberBuildError;

    fn owned(owned: &[u16]) -> Owned {
        Owned::new(
            "events".into(),
            Partitions::new(4).expect("4 partitions"),
            owned.to_vec(),
        )
    }

    #[test]
    fn one_consumer_per_owned_partition() {
        let set = owned(&[3, 1, 3]);
        assert!(set.check("").is_ok());
        assert_eq!(
            set.pulls("billing"),
            [
                PullSpec {
                    durable: "billing-p1".into(),
                    filter: "events.p1.>".into()
                },
                PullSpec {
                    durable: "billing-p3".into(),
                    filter: "events.p3.>".into()
                },
            ]
        );
    }

    #[test]
    fn bad_settings_are_refused() {
        let refused = |set: Owned, filter: &str, words: &str| match set.check(filter) {
            Err(SubscriberBuildError::InvalidConfig(what)) => {
                assert!(what.contains(words), "{what}")
            }
            other => panic!("expected InvalidConfig, got {other:?}"),
        };
        refused(owned(&[]), "", "empty");
        refused(owned(&[4]), "", "out of range");
        refused(owned(&[0]), "events.>", "exclude each other");
        refused(
            Owned::new("bad.*".into(), Partitions::new(2).expect("2"), vec![0]),
            "",
            "not a valid subject prefix",
        );
    }
}
