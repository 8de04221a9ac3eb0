//! Dead letters: the policy for messages the subscriber cannot handle, the
//! copy it publishes, and reading and replaying those copies.

pub mod policy;
pub mod replay;

pub(crate) use policy::{DeadLetterKind, DeadLetterPolicy};
