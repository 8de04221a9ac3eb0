//! This binary started as a child process by a part: the processor, the
//! drain, the writers and the soak's subscriber, each under a part name of
//! its own on the command line. [`protocol`] is how every one of them is
//! started, waited for and stopped.

pub(crate) mod drain;
pub(crate) mod processor;
pub(crate) mod protocol;
pub(crate) mod subscriber;
pub(crate) mod writer;
