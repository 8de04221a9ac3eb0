//! Partitioning an event stream by aggregate, so consumers on several
//! processes each own a fixed set of partitions: [`Partitions`].
//!
//! The partition of an aggregate is a pure function of its type and id,
//! stable forever (pinned by test vectors), so writers and consumers in any
//! language agree on it:
//!
//! 1. FNV-1a, 64 bits (offset basis `0xcbf29ce484222325`, prime
//!    `0x100000001b3`), over the bytes of the aggregate type (UTF-8), one
//!    separator byte `0x1f`, then the bytes of the aggregate id (UTF-8);
//! 2. the hash modulo the partition count.
//!
//! A message of partition `k` is published on `<prefix>.p<k>.<event name>`
//! and read by the consumer filtering `<prefix>.p<k>.>`.

use std::fmt;

/// The most partitions a stream may be split into.
pub const MAX_PARTITIONS: u16 = 4096;

/// FNV-1a 64-bit offset basis.
const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
/// FNV-1a 64-bit prime.
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;
/// The byte between the aggregate type and the aggregate id.
const SEPARATOR: u8 = 0x1f;

/// A partition count that is out of range.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PartitionsError {
    /// Zero partitions: no message would have anywhere to go.
    #[error("the partition count must be at least 1")]
    Zero,
    /// More than [`MAX_PARTITIONS`].
    #[error("{count} partitions are more than the most, {max}")]
    TooMany {
        /// The count asked for.
        count: u32,
        /// [`MAX_PARTITIONS`].
        max: u16,
    },
}

/// How many partitions an event stream is split into, by aggregate (see
/// the [module docs](self) for the function).
///
/// ```
/// use txoutbox_core::Partitions;
/// let partitions = Partitions::new(8)?;
/// let k = partitions.of("order", "42");
/// assert!(k < 8);
/// assert_eq!(k, partitions.of("order", "42")); // always the same
/// assert_eq!(Partitions::subject("events", k, "order.placed"), format!("events.p{k}.order.placed"));
/// # Ok::<(), txoutbox_core::partition::PartitionsError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Partitions(u16);

impl Partitions {
    /// `count` partitions, 1 to [`MAX_PARTITIONS`].
    ///
    /// ```
    /// use txoutbox_core::Partitions;
    /// use txoutbox_core::partition::PartitionsError;
    /// assert_eq!(Partitions::new(4).map(|p| p.count()), Ok(4));
    /// assert_eq!(Partitions::new(0), Err(PartitionsError::Zero));
    /// assert!(Partitions::new(5000).is_err());
    /// ```
    pub fn new(count: u32) -> Result<Self, PartitionsError> {
        match u16::try_from(count) {
            Ok(0) => Err(PartitionsError::Zero),
            Ok(count) if count <= MAX_PARTITIONS => Ok(Self(count)),
            _ => Err(PartitionsError::TooMany {
                count,
                max: MAX_PARTITIONS,
            }),
        }
    }

    /// The number of partitions.
    ///
    /// ```
    /// assert_eq!(txoutbox_core::Partitions::new(3)?.count(), 3);
    /// # Ok::<(), txoutbox_core::partition::PartitionsError>(())
    /// ```
    pub fn count(self) -> u16 {
        self.0
    }

    /// The partition, `0..count`, of the aggregate `aggregate_type`
    /// `aggregate_id`: FNV-1a 64 of `type`, `0x1f`, `id`, modulo the count.
    ///
    /// ```
    /// use txoutbox_core::Partitions;
    /// let partitions = Partitions::new(16)?;
    /// assert_eq!(partitions.of("order", "42"), 2);
    /// # Ok::<(), txoutbox_core::partition::PartitionsError>(())
    /// ```
    pub fn of(self, aggregate_type: &str, aggregate_id: &str) -> u16 {
        let hash = fnv1a(
            aggregate_type
                .bytes()
                .chain(std::iter::once(SEPARATOR))
                .chain(aggregate_id.bytes()),
        );
        // The remainder is below the count, a u16.
        u16::try_from(hash % u64::from(self.0)).unwrap_or(0)
    }

    /// The subject of an event called `event_name` in partition
    /// `partition`: `<prefix>.p<partition>.<event_name>`.
    ///
    /// ```
    /// use txoutbox_core::Partitions;
    /// assert_eq!(Partitions::subject("events", 3, "order.placed"), "events.p3.order.placed");
    /// ```
    pub fn subject(prefix: &str, partition: u16, event_name: &str) -> String {
        format!("{prefix}.p{partition}.{event_name}")
    }

    /// The filter subject of partition `partition`: `<prefix>.p<partition>.>`.
    ///
    /// ```
    /// use txoutbox_core::Partitions;
    /// assert_eq!(Partitions::filter("events", 3), "events.p3.>");
    /// ```
    pub fn filter(prefix: &str, partition: u16) -> String {
        format!("{prefix}.p{partition}.>")
    }

    /// Every partition.
    ///
    /// ```
    /// use txoutbox_core::Partitions;
    /// assert_eq!(Partitions::new(3)?.all(), [0, 1, 2]);
    /// # Ok::<(), txoutbox_core::partition::PartitionsError>(())
    /// ```
    pub fn all(self) -> Vec<u16> {
        (0..self.0).collect()
    }

    /// The partitions process `process_index` of `process_count` owns: those
    /// `k` with `k % process_count == process_index` (none when the index is
    /// out of range). Every partition has exactly one owner.
    ///
    /// ```
    /// use txoutbox_core::Partitions;
    /// let partitions = Partitions::new(8)?;
    /// assert_eq!(partitions.share(1, 3), [1, 4, 7]);
    /// assert_eq!(partitions.share(3, 3), [] as [u16; 0]);
    /// # Ok::<(), txoutbox_core::partition::PartitionsError>(())
    /// ```
    pub fn share(self, process_index: u16, process_count: u16) -> Vec<u16> {
        if process_index >= process_count {
            return Vec::new();
        }
        (0..self.0)
            .filter(|k| k % process_count == process_index)
            .collect()
    }
}

impl fmt::Display for Partitions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} partitions", self.0)
    }
}

/// FNV-1a, 64 bits.
fn fnv1a(bytes: impl IntoIterator<Item = u8>) -> u64 {
    bytes.into_iter().fold(FNV_OFFSET, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(FNV_PRIME)
    })
}

#[cfg(test)]
mod tests {
    use super::{Partitions, PartitionsError, fnv1a};

    #[test]
    fn fnv1a_matches_the_reference_vectors() {
        // From the FNV reference test suite.
        assert_eq!(fnv1a(*b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(*b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a(*b"foobar"), 0x8594_4171_f739_67e8);
    }

    /// Pinned forever: writers and consumers deployed apart must agree.
    #[test]
    fn partitions_are_pinned() {
        let p16 = Partitions::new(16).unwrap();
        let p3 = Partitions::new(3).unwrap();
        let p4096 = Partitions::new(4096).unwrap();
        let vectors: [(&str, &str, u16, u16, u16); 5] = [
            ("order", "42", 2, 0, 2850),
            ("order", "43", 5, 1, 3285),
            ("customer", "c-1", 1, 0, 3937),
            (
                "standalone",
                "0190f6c2-0000-7000-8000-000000000000",
                7,
                1,
                2855,
            ),
            ("", "", 14, 0, 2958),
        ];
        for (aggregate_type, aggregate_id, in16, in3, in4096) in vectors {
            assert_eq!(
                (
                    p16.of(aggregate_type, aggregate_id),
                    p3.of(aggregate_type, aggregate_id),
                    p4096.of(aggregate_type, aggregate_id)
                ),
                (in16, in3, in4096),
                "{aggregate_type}/{aggregate_id}"
            );
        }
        assert_eq!(Partitions::new(1).unwrap().of("order", "42"), 0);
    }

    #[test]
    fn the_separator_keeps_type_and_id_apart() {
        let p = Partitions::new(4096).unwrap();
        assert_ne!(p.of("ab", "c"), p.of("a", "bc"));
    }

    #[test]
    fn counts_out_of_range_are_refused() {
        assert_eq!(Partitions::new(0), Err(PartitionsError::Zero));
        assert_eq!(
            Partitions::new(4097),
            Err(PartitionsError::TooMany {
                count: 4097,
                max: 4096
            })
        );
        assert_eq!(
            Partitions::new(70_000),
            Err(PartitionsError::TooMany {
                count: 70_000,
                max: 4096
            })
        );
        assert_eq!(Partitions::new(4096).map(Partitions::count), Ok(4096));
    }

    #[test]
    fn subjects_and_filters() {
        assert_eq!(
            Partitions::subject("acme.events", 0, "order.placed"),
            "acme.events.p0.order.placed"
        );
        assert_eq!(Partitions::filter("acme.events", 12), "acme.events.p12.>");
    }

    #[test]
    fn shares_cover_every_partition_once() {
        let p = Partitions::new(10).unwrap();
        let mut all: Vec<u16> = (0..3).flat_map(|i| p.share(i, 3)).collect();
        all.sort_unstable();
        assert_eq!(all, p.all());
        assert_eq!(p.share(0, 3), [0, 3, 6, 9]);
        assert_eq!(p.share(2, 3), [2, 5, 8]);
        assert!(p.share(0, 0).is_empty());
        assert_eq!(p.share(0, 1), p.all());
    }
}
