//! In process: a subscriber run without JetStream, for the testing kit.

pub(crate) mod runner;

pub(crate) use runner::InProcess;
