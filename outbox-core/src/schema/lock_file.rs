//! The lock file: [`SchemaLock`] reads it, writes it, and guards it in a
//! test.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::UPDATE_ENV;
use super::report::{LockReport, check_against};
use crate::registry::EventRegistry;

/// Reading or writing the lock file failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LockError {
    /// The file could not be read or written.
    #[error("schema lock {}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a lock (`{ "name": { "version": schema } }`).
    #[error("schema lock {} is not `{{ \"name\": {{ \"version\": schema }} }}`", path.display())]
    Malformed {
        /// The file.
        path: PathBuf,
        /// What is wrong, if serde said.
        #[source]
        source: Option<serde_json::Error>,
    },
}

/// A lock file of event schemas: see the [module docs](super).
#[derive(Debug, Clone)]
pub struct SchemaLock {
    path: PathBuf,
}

impl SchemaLock {
    /// The lock kept in `path` (which need not exist yet).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into() }
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Compares the registry's schemas with the file (a missing file is an
    /// empty lock). Writes nothing.
    pub fn check(&self, registry: &EventRegistry) -> Result<LockReport, LockError> {
        let locked = self.read()?;
        Ok(check_against(&locked, registry))
    }

    /// Writes the registry's schemas to the file, whatever changed, and
    /// returns what changed.
    pub fn update(&self, registry: &EventRegistry) -> Result<LockReport, LockError> {
        let report = self.check(registry)?;
        self.write(&report.lock)?;
        Ok(report)
    }

    /// The test helper: panics with what changed and what to do when a
    /// locked version changed incompatibly or an event has no schema;
    /// otherwise writes additions and compatible changes to the file. On CI
    /// (`CI` set) a file that is not up to date fails instead of being
    /// written. With [`OUTBOX_UPDATE_SCHEMA_LOCK=1`](UPDATE_ENV) it accepts
    /// every change and rewrites the file.
    #[track_caller]
    pub fn assert(&self, registry: &EventRegistry) {
        let file = self.path.display();
        if std::env::var_os(UPDATE_ENV).is_some_and(|v| v != "0" && !v.is_empty()) {
            if let Err(err) = self.update(registry) {
                panic!("{}", chain(&err));
            }
            return;
        }
        let report = match self.check(registry) {
            Ok(report) => report,
            Err(err) => panic!("{}", chain(&err)),
        };
        if !report.is_ok() {
            panic!("{file}: {report}");
        }
        if report.is_up_to_date() {
            return;
        }
        if std::env::var_os("CI").is_some() {
            panic!(
                "{file} is not up to date ({report}): run the tests locally (or with \
                 {UPDATE_ENV}=1) and commit it"
            );
        }
        if let Err(err) = self.write(&report.lock) {
            panic!("{}", chain(&err));
        }
    }

    fn read(&self) -> Result<Value, LockError> {
        // Bytes, not a string: a file that is not UTF-8 is a malformed
        // lock, not a failure to read it.
        let text = match std::fs::read(&self.path) {
            Ok(text) => text,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Value::Object(Map::new()));
            }
            Err(source) => {
                return Err(LockError::Io {
                    path: self.path.clone(),
                    source,
                });
            }
        };
        let value: Value =
            serde_json::from_slice(&text).map_err(|source| LockError::Malformed {
                path: self.path.clone(),
                source: Some(source),
            })?;
        let well_formed = value.as_object().is_some_and(|names| {
            names.values().all(|versions| {
                versions
                    .as_object()
                    .is_some_and(|v| v.keys().all(|k| k.parse::<u32>().is_ok()))
            })
        });
        if !well_formed {
            return Err(LockError::Malformed {
                path: self.path.clone(),
                source: None,
            });
        }
        Ok(value)
    }

    fn write(&self, lock: &Value) -> Result<(), LockError> {
        let mut text =
            serde_json::to_string_pretty(lock).map_err(|source| LockError::Malformed {
                path: self.path.clone(),
                source: Some(source),
            })?;
        text.push('\n');
        std::fs::write(&self.path, text).map_err(|source| LockError::Io {
            path: self.path.clone(),
            source,
        })
    }
}

fn chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    text
}
