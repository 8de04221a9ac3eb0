//! What a check of the lock found: [`LockReport`], and the check itself on
//! a lock already read.

use std::fmt;

use serde_json::{Map, Value};

use super::UPDATE_ENV;
use super::comparison::compare;
use super::extraction::schemas;
use super::incompatibility::{Incompatibility, IncompatibleKind};
use crate::registry::{EventRegistration, EventRegistry};

/// What [`SchemaLock::check`](super::SchemaLock::check) found.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct LockReport {
    /// Changes the locked versions cannot take.
    pub incompatible: Vec<Incompatibility>,
    /// (name, version)s registered but not locked yet.
    pub added: Vec<(String, u32)>,
    /// Locked (name, version)s whose schema changed compatibly.
    pub changed: Vec<(String, u32)>,
    /// Registered (name, version)s without a schema (the type does not
    /// implement `schemars::JsonSchema`), as `Type (name vN)`.
    pub without_schema: Vec<String>,
    /// The lock as it would be written: the registry's schemas.
    pub lock: Value,
}

impl LockReport {
    /// Whether the lock file is up to date (nothing added or changed).
    pub fn is_up_to_date(&self) -> bool {
        self.incompatible.is_empty() && self.added.is_empty() && self.changed.is_empty()
    }

    /// Whether nothing is incompatible and every registration has a schema.
    pub fn is_ok(&self) -> bool {
        self.incompatible.is_empty() && self.without_schema.is_empty()
    }
}

impl fmt::Display for LockReport {
    /// What failed, and what to do.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.incompatible.is_empty() {
            writeln!(
                f,
                "the wire contract of published events changed incompatibly:"
            )?;
            for change in &self.incompatible {
                writeln!(f, "  - {change}")?;
            }
            writeln!(
                f,
                "Consumers depend on each (name, version)'s shape. Keep the published type as it \
                 was and publish the change as a new version with an upcast from the old one \
                 (`#[event(name = \"..\", version = N + 1, upcast_from = OldType)]` and \
                 `impl From<OldType>`). If the version was never published, accept the change \
                 with {UPDATE_ENV}=1."
            )?;
        }
        if !self.without_schema.is_empty() {
            writeln!(
                f,
                "events without a JSON Schema (derive `schemars::JsonSchema` on them, with \
                 outbox-core's feature `schema`): {}",
                self.without_schema.join(", ")
            )?;
        }
        if self.incompatible.is_empty() && self.without_schema.is_empty() {
            write!(
                f,
                "{} added, {} changed compatibly",
                self.added.len(),
                self.changed.len()
            )?;
        }
        Ok(())
    }
}

/// [`SchemaLock::check`](super::SchemaLock::check) on a lock already read: `locked` is
/// `{ "name": { "version": schema } }`.
pub fn check_against(locked: &Value, registry: &EventRegistry) -> LockReport {
    let current = schemas(registry);
    let mut report = LockReport::default();
    let mut lock = Map::new();
    for (name, versions) in &current {
        let mut entry = Map::new();
        for (version, schema) in versions {
            match locked.get(name).and_then(|v| v.get(version.to_string())) {
                None => report.added.push((name.clone(), *version)),
                Some(old) if old == schema => {}
                Some(old) => {
                    let found = compare(name, *version, old, schema);
                    if found.is_empty() {
                        report.changed.push((name.clone(), *version));
                    }
                    report.incompatible.extend(found);
                }
            }
            entry.insert(version.to_string(), schema.clone());
        }
        lock.insert(name.clone(), Value::Object(entry));
    }
    for (name, versions) in locked.as_object().into_iter().flatten() {
        for version in versions.as_object().into_iter().flatten().map(|(v, _)| v) {
            let Ok(version) = version.parse::<u32>() else {
                continue;
            };
            if !current.get(name).is_some_and(|v| v.contains_key(&version)) {
                report.incompatible.push(Incompatibility {
                    name: name.clone(),
                    version,
                    path: String::new(),
                    kind: IncompatibleKind::VersionUnregistered,
                });
            }
        }
    }
    report.without_schema = registry
        .iter()
        .filter(|r| r.schema().is_none())
        .map(EventRegistration::describe)
        .collect();
    report.lock = Value::Object(lock);
    report
}
