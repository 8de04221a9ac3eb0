//! `outbox stream ensure`: what it did, or how the existing stream differs.

use std::fmt::Write as _;

use serde_json::json;
use txoutbox_nats::Ensured;

/// The stream created or found, as text or JSON.
pub(crate) fn ensured(ensured: &Ensured, json: bool) -> String {
    let config = &ensured.info.config;
    if json {
        let differences: Vec<String> = ensured.differences.iter().map(|d| d.to_string()).collect();
        return format!(
            "{}\n",
            json!({
                "stream": config.name,
                "created": ensured.created,
                "subjects": config.subjects,
                "replicas": config.num_replicas,
                "duplicate_window_seconds": config.duplicate_window.as_secs_f64(),
                "max_age_seconds": config.max_age.as_secs_f64(),
                "storage": format!("{:?}", config.storage).to_lowercase(),
                "messages": ensured.info.state.messages,
                "differences": differences,
            })
        );
    }
    let mut out = String::new();
    let what = if ensured.created {
        "created stream"
    } else {
        "stream exists:"
    };
    let _ = writeln!(
        out,
        "{what} {} capturing {:?}: replicas {}, duplicate window {}, storage {}, max age {}, {} messages",
        config.name,
        config.subjects,
        config.num_replicas,
        humantime::format_duration(config.duplicate_window),
        format!("{:?}", config.storage).to_lowercase(),
        if config.max_age.is_zero() {
            "none".to_owned()
        } else {
            humantime::format_duration(config.max_age).to_string()
        },
        ensured.info.state.messages,
    );
    if !ensured.created {
        if ensured.differences.is_empty() {
            let _ = writeln!(out, "it fits the given settings");
        } else {
            let _ = writeln!(out, "it differs from the given settings (kept as it is):");
            for difference in &ensured.differences {
                let _ = writeln!(out, "  {difference}");
            }
        }
    }
    out
}
