//! Inbox groups: the messages inbox handlers apply, grouped into shared
//! transactions (one task drives every lane in rounds), and what becomes
//! of each message of a group.

pub(crate) mod group_apply;
pub(crate) mod grouping;
pub(crate) mod inbox_groups;

pub(crate) use inbox_groups::InboxGroups;
