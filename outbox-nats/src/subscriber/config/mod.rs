//! Configuration: settings as data, the retry backoff, and the errors of
//! building and running a subscriber.

pub(crate) mod backoff;
pub(crate) mod error;
pub(crate) mod settings;
pub(crate) mod validation;

pub(crate) use backoff::Backoff;
pub(crate) use error::{SubscriberBuildError, SubscriberError};
