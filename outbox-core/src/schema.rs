//! A lock on the wire contract (feature `schema`): the JSON Schema of every
//! registered (name, version), committed as a lock file, and a check that
//! fails when a published version's payload changes in a way its consumers
//! cannot read.
//!
//! Consumers in other services (and other languages) depend on each event's
//! JSON shape per (name, version). Once a version is published, its shape
//! may only grow in ways every reader takes in stride; anything else needs
//! a **new version** with an upcast (`#[event(version = 2, upcast_from =
//! OrderPlacedV1)]`), so old messages and old consumers keep working.
//!
//! # Where the schemas come from
//!
//! `#[derive(IntegrationEvent)]` records the payload's schema in the
//! type's [`EventRegistration`] when the type also derives
//! [`schemars::JsonSchema`] and this feature is on: nothing else to write,
//! and types without `JsonSchema` still compile (the derive looks for the
//! impl without requiring it). A hand-written `IntegrationEvent` adds
//! `.with_schema(txoutbox_core::schema::json_schema::<Self>)` to its
//! registration.
//!
//! # The lock file
//!
//! [`SchemaLock`] keeps `{ "name": { "version": schema } }` in a JSON file
//! (e.g. `events.lock.json`, committed beside the events). One test
//! guards it:
//!
//! ```no_run
//! # use txoutbox_core::EventRegistry;
//! # use txoutbox_core::schema::SchemaLock;
//! #[test]
//! fn the_wire_contract_holds() {
//!     let registry = EventRegistry::from_inventory().unwrap();
//!     SchemaLock::new(concat!(env!("CARGO_MANIFEST_DIR"), "/events.lock.json"))
//!         .assert(&registry);
//! }
//! ```
//!
//! [`assert`](SchemaLock::assert) fails when a locked (name, version)
//! changed incompatibly, naming each change and what to do. Otherwise it
//! writes the new state: new (name, version)s and compatible changes are
//! added to the file (commit it). On CI (`CI` set) it writes nothing and
//! fails instead when the file is not up to date. With
//! `OUTBOX_UPDATE_SCHEMA_LOCK=1` it accepts every change and rewrites the
//! file: for a version that was never published.
//!
//! # What is compatible
//!
//! Messages of one version written before and after a change sit side by
//! side in the outbox table and the stream, and consumers built before and
//! after it read both. So, per (name, version):
//!
//! | change | |
//! |---|---|
//! | a new optional field (`Option<T>`, `#[serde(default)]`) | compatible: old readers ignore it, new readers default it |
//! | descriptions, titles, examples | compatible |
//! | a field removed | **incompatible**: readers that need it fail, or silently lose it |
//! | a field's type changed (also: an enum's variants, a number's format) | **incompatible** |
//! | a required field added, or an optional one made required | **incompatible**: messages written before lack it |
//! | a required field made optional | **incompatible**: old readers need it |
//! | a field added to a type that rejects unknown fields (`deny_unknown_fields`) | **incompatible** |
//! | a (name, version) no longer registered | **incompatible**: its messages can no longer be decoded |

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::registry::{EventRegistration, EventRegistry};

/// The `schemars` this crate reads schemas with (a public dependency:
/// derive `JsonSchema` with the same major version).
pub use schemars;

/// The environment variable that makes [`SchemaLock::assert`] accept every
/// change and rewrite the lock file.
pub const UPDATE_ENV: &str = "OUTBOX_UPDATE_SCHEMA_LOCK";

/// `T`'s JSON Schema, as a registration records it (see
/// [`EventRegistration::with_schema`]).
pub fn json_schema<T: schemars::JsonSchema>() -> Option<Value> {
    Some(
        schemars::SchemaGenerator::default()
            .into_root_schema_for::<T>()
            .to_value(),
    )
}

/// The schemas of a registry: name → version → schema. Registrations
/// without a schema are left out (see [`SchemaLock::check`], which names
/// them).
pub fn schemas(registry: &EventRegistry) -> BTreeMap<String, BTreeMap<u32, Value>> {
    let mut schemas: BTreeMap<String, BTreeMap<u32, Value>> = BTreeMap::new();
    for registration in registry.iter() {
        if let Some(schema) = registration.schema() {
            schemas
                .entry(registration.name().to_owned())
                .or_default()
                .insert(registration.version(), schema);
        }
    }
    schemas
}

/// One change a locked (name, version) cannot take.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Incompatibility {
    /// The event name.
    pub name: String,
    /// The version.
    pub version: u32,
    /// Where in the payload, as a JSON pointer (`/customer/email`; empty:
    /// the payload itself).
    pub path: String,
    /// What changed.
    pub kind: IncompatibleKind,
}

/// What kind of change an [`Incompatibility`] is.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum IncompatibleKind {
    /// A field of the locked schema is gone.
    FieldRemoved,
    /// A required field was added (or an optional one made required).
    RequiredFieldAdded,
    /// A required field was made optional.
    RequiredFieldMadeOptional,
    /// A field was added to a type that rejects unknown fields.
    FieldAddedToClosedType,
    /// The type changed (`from` and `to`, as JSON Schema text).
    TypeChanged {
        /// The locked schema's part.
        from: String,
        /// The current one.
        to: String,
    },
    /// The (name, version) is locked but no longer registered.
    VersionUnregistered,
}

impl fmt::Display for Incompatibility {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (name, version) = (&self.name, self.version);
        let at = if self.path.is_empty() {
            String::new()
        } else {
            format!(" `{}`", self.path)
        };
        match &self.kind {
            IncompatibleKind::FieldRemoved => write!(f, "`{name}` v{version}: field{at} removed"),
            IncompatibleKind::RequiredFieldAdded => {
                write!(f, "`{name}` v{version}: required field{at} added")
            }
            IncompatibleKind::RequiredFieldMadeOptional => {
                write!(f, "`{name}` v{version}: required field{at} made optional")
            }
            IncompatibleKind::FieldAddedToClosedType => write!(
                f,
                "`{name}` v{version}: field{at} added to a type that rejects unknown fields"
            ),
            IncompatibleKind::TypeChanged { from, to } => {
                write!(
                    f,
                    "`{name}` v{version}: type of{at} changed from {from} to {to}"
                )
            }
            IncompatibleKind::VersionUnregistered => write!(
                f,
                "`{name}` v{version} is locked but no longer registered: its messages cannot be \
                 decoded"
            ),
        }
    }
}

/// The incompatible changes from `locked` to `current`, two schemas of
/// `name` v`version` (empty: compatible).
pub fn compare(name: &str, version: u32, locked: &Value, current: &Value) -> Vec<Incompatibility> {
    let mut found = Vec::new();
    let mut walk = Walk {
        locked_root: locked,
        current_root: current,
        seen: BTreeSet::new(),
        found: &mut found,
    };
    walk.compare(locked, current, String::new());
    found
        .into_iter()
        .map(|(path, kind)| Incompatibility {
            name: name.to_owned(),
            version,
            path,
            kind,
        })
        .collect()
}

/// Keywords that describe a schema without constraining it.
const ANNOTATIONS: [&str; 8] = [
    "$schema",
    "$id",
    "$comment",
    "title",
    "description",
    "examples",
    "default",
    "deprecated",
];

struct Walk<'a, 'f> {
    locked_root: &'a Value,
    current_root: &'a Value,
    /// `$ref` pairs already compared (recursive types).
    seen: BTreeSet<(String, String)>,
    found: &'f mut Vec<(String, IncompatibleKind)>,
}

/// Keywords compared part by part rather than as a whole.
const STRUCTURAL: [&str; 8] = [
    "properties",
    "required",
    "items",
    "additionalItems",
    "anyOf",
    "oneOf",
    "allOf",
    "prefixItems",
];

impl Walk<'_, '_> {
    fn compare(&mut self, locked: &Value, current: &Value, path: String) {
        if let (Some(l), Some(c)) = (reference(locked), reference(current))
            && !self.seen.insert((l.to_owned(), c.to_owned()))
        {
            return;
        }
        let locked = resolve(self.locked_root, locked);
        let current = resolve(self.current_root, current);
        let (Some(l), Some(c)) = (locked.as_object(), current.as_object()) else {
            // `true` / `false` schemas.
            if locked != current {
                self.type_changed(path, &locked, &current);
            }
            return;
        };
        let (l, c) = (constraints(l), constraints(c));
        // Everything but the structure must be equal: `type`, `format`,
        // `enum`, `const`, bounds.
        let rest = |schema: &Map<String, Value>| -> Map<String, Value> {
            schema
                .iter()
                .filter(|(key, value)| {
                    !STRUCTURAL.contains(&key.as_str())
                        && (*key != "additionalProperties" || value.is_object())
                })
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        };
        let alternatives =
            |s: &Map<String, Value>, key: &str| s.get(key).and_then(Value::as_array).map(Vec::len);
        let same_shape = ["anyOf", "oneOf", "allOf", "prefixItems"]
            .iter()
            .all(|key| alternatives(&l, key) == alternatives(&c, key))
            && l.contains_key("items") == c.contains_key("items");
        if rest(&l) != rest(&c) || !same_shape {
            self.type_changed(path, &Value::Object(l), &Value::Object(c));
            return;
        }
        // Objects: field by field.
        if l.contains_key("properties") || c.contains_key("properties") {
            self.compare_fields(&l, &c, &path);
        }
        // Arrays: their items; maps: their values.
        for key in ["items", "additionalItems", "additionalProperties"] {
            if let (Some(li), Some(ci)) = (l.get(key), c.get(key))
                && li.is_object()
                && ci.is_object()
            {
                self.compare(li, ci, format!("{path}/*"));
            }
        }
        // Alternatives (`Option<Struct>`, enums with data): pairwise.
        for key in ["anyOf", "oneOf", "allOf", "prefixItems"] {
            if let (Some(Value::Array(la)), Some(Value::Array(ca))) = (l.get(key), c.get(key)) {
                for (i, (li, ci)) in la.iter().zip(ca).enumerate() {
                    let at = if key == "prefixItems" {
                        format!("{path}/{i}")
                    } else {
                        path.clone()
                    };
                    self.compare(li, ci, at);
                }
            }
        }
    }

    fn compare_fields(&mut self, l: &Map<String, Value>, c: &Map<String, Value>, path: &str) {
        let empty = Map::new();
        let lp = l
            .get("properties")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        let cp = c
            .get("properties")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        let required = |s: &Map<String, Value>| -> BTreeSet<String> {
            s.get("required")
                .and_then(Value::as_array)
                .map(|names| {
                    names
                        .iter()
                        .filter_map(|n| n.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default()
        };
        let (lreq, creq) = (required(l), required(c));
        let closed = l.get("additionalProperties") == Some(&Value::Bool(false));
        for (field, locked_field) in lp {
            let at = format!("{path}/{}", escape(field));
            let Some(current_field) = cp.get(field) else {
                self.found.push((at, IncompatibleKind::FieldRemoved));
                continue;
            };
            match (lreq.contains(field), creq.contains(field)) {
                (false, true) => self
                    .found
                    .push((at.clone(), IncompatibleKind::RequiredFieldAdded)),
                (true, false) => self
                    .found
                    .push((at.clone(), IncompatibleKind::RequiredFieldMadeOptional)),
                _ => {}
            }
            self.compare(locked_field, current_field, at);
        }
        for field in cp.keys().filter(|field| !lp.contains_key(*field)) {
            let at = format!("{path}/{}", escape(field));
            if creq.contains(field) {
                self.found.push((at, IncompatibleKind::RequiredFieldAdded));
            } else if closed {
                self.found
                    .push((at, IncompatibleKind::FieldAddedToClosedType));
            }
        }
    }

    fn type_changed(&mut self, path: String, locked: &Value, current: &Value) {
        self.found.push((
            path,
            IncompatibleKind::TypeChanged {
                from: brief(locked),
                to: brief(current),
            },
        ));
    }
}

/// A JSON pointer segment.
fn escape(field: &str) -> String {
    field.replace('~', "~0").replace('/', "~1")
}

fn reference(schema: &Value) -> Option<&str> {
    schema.get("$ref").and_then(Value::as_str)
}

/// `schema` with a local `$ref` (`#/$defs/X`, `#/definitions/X`) replaced by
/// its target, merged with the schema's own keywords.
fn resolve(root: &Value, schema: &Value) -> Value {
    let Some(target) = reference(schema)
        .and_then(|r| r.strip_prefix('#'))
        .and_then(|pointer| root.pointer(pointer))
    else {
        return schema.clone();
    };
    let mut merged = target.as_object().cloned().unwrap_or_default();
    if let Some(own) = schema.as_object() {
        for (key, value) in own.iter().filter(|(key, _)| *key != "$ref") {
            merged.insert(key.clone(), value.clone());
        }
    }
    Value::Object(merged)
}

/// The keywords of `schema` that constrain values.
fn constraints(schema: &Map<String, Value>) -> Map<String, Value> {
    schema
        .iter()
        .filter(|(key, _)| {
            !ANNOTATIONS.contains(&key.as_str()) && *key != "$defs" && *key != "definitions"
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// A short text of a schema for messages: its `type` (and `format`), else
/// its JSON.
fn brief(schema: &Value) -> String {
    let object = schema.as_object();
    let get = |key: &str| object.and_then(|o| o.get(key));
    match (get("type"), get("format"), get("enum")) {
        (_, _, Some(values)) => format!("one of {values}"),
        (Some(ty), Some(Value::String(format)), None) => format!("{ty} ({format})"),
        (Some(ty), None, None) => ty.to_string(),
        _ => {
            let mut text = schema.to_string();
            if text.len() > 120 {
                let cut = (0..=117)
                    .rev()
                    .find(|i| text.is_char_boundary(*i))
                    .unwrap_or(0);
                text.truncate(cut);
                text.push_str("...");
            }
            text
        }
    }
}

/// What [`SchemaLock::check`] found.
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

/// A lock file of event schemas: see the [module docs](self).
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
        let text = match std::fs::read_to_string(&self.path) {
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
        let value: Value = serde_json::from_str(&text).map_err(|source| LockError::Malformed {
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

/// [`SchemaLock::check`] on a lock already read: `locked` is
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

fn chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    text
}
