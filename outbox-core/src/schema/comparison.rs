//! The comparison of a locked schema with the current one: what changed
//! that readers of the locked version cannot take.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use super::incompatibility::{Incompatibility, IncompatibleKind};

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
