//! The shipped dashboard and alert rules (`ops/`) against the metrics the
//! library really exports: the Grafana dashboard parses and has what an
//! import needs (title, uid, a `${datasource}` variable, panels with a type
//! and queries), every alert rule has its `for:`, severity and annotations,
//! and every metric a query names is one the library emits.
//!
//! The emitted set comes from the code: the library crates' sources are
//! scanned for `counter!` / `gauge!` / `histogram!` calls (names given as
//! literals or as constants of the crate), and each is recorded into a
//! `metrics-exporter-prometheus` recorder built as `txoutbox-axum` builds
//! its own, whose rendering gives the series names a scrape sees (its
//! histograms are summaries: `name{quantile=..}`, `name_sum`, `name_count`).
//! Exported metrics no query uses are printed as a note.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_json::Value;
use txoutbox::axum::metrics_exporter_prometheus::PrometheusBuilder;

/// The crates whose metrics a service exports.
const LIBRARY_CRATES: [&str; 4] = [
    "outbox-core",
    "outbox-nats",
    "outbox-sea-orm",
    "outbox-axum",
];
const DASHBOARD: &str = "ops/grafana/outbox.json";
const ALERTS: &str = "ops/prometheus/outbox-alerts.yml";

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ is inside the workspace")
        .to_path_buf()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|err| panic!("{}: {err}", path.display()))
}

fn rust_files(dir: &Path, files: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|err| panic!("{}: {err}", dir.display()));
    for entry in entries {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            rust_files(&path, files);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            files.push(path);
        }
    }
}

/// `text` without comment lines and without its `#[cfg(test)] mod ... { }`
/// blocks (a unit test's own metrics are not the library's).
fn library_code(text: &str) -> String {
    let text: String = text
        .lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .map(|line| format!("{line}\n"))
        .collect();
    let mut code = String::new();
    let mut rest = text.as_str();
    while let Some(at) = rest.find("#[cfg(test)]") {
        code.push_str(&rest[..at]);
        let after = rest[at + "#[cfg(test)]".len()..].trim_start();
        let is_module = after.starts_with("mod ")
            && after
                .find('{')
                .is_some_and(|brace| after.find(';').is_none_or(|semicolon| brace < semicolon));
        if !is_module {
            code.push_str("#[cfg(test)]");
            rest = &rest[at + "#[cfg(test)]".len()..];
            continue;
        }
        let open = after.find('{').expect("checked above");
        let mut depth = 0usize;
        let mut end = after.len();
        for (index, char) in after[open..].char_indices() {
            match char {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = open + index + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        rest = &after[end..];
    }
    code.push_str(rest);
    code
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Counter,
    Gauge,
    Histogram,
}

/// Every metric the library crates record, by name, scanned from their code.
fn library_metrics() -> BTreeMap<String, Kind> {
    let root = workspace_root();
    let mut metrics = BTreeMap::new();
    for krate in LIBRARY_CRATES {
        let mut files = Vec::new();
        rust_files(&root.join(krate).join("src"), &mut files);
        let sources: Vec<(PathBuf, String)> = files
            .into_iter()
            .map(|path| {
                let code = library_code(&read(&path));
                (path, code)
            })
            .collect();
        // `const NAME: &str = "value";` of the crate, for names given as constants.
        let mut constants = BTreeMap::new();
        for (_, code) in &sources {
            for line in code.lines() {
                let Some((_, declaration)) = line.split_once("const ") else {
                    continue;
                };
                let Some((name, value)) = declaration.split_once(": &str = \"") else {
                    continue;
                };
                let Some((value, _)) = value.split_once('"') else {
                    continue;
                };
                constants.insert(name.trim().to_owned(), value.to_owned());
            }
        }
        for (path, code) in &sources {
            for (macro_name, kind) in [
                ("counter!(", Kind::Counter),
                ("gauge!(", Kind::Gauge),
                ("histogram!(", Kind::Histogram),
            ] {
                for (at, _) in code.match_indices(macro_name) {
                    let preceding = code[..at].chars().next_back();
                    if preceding.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                        continue; // `describe_counter!(` and the like
                    }
                    let argument = code[at + macro_name.len()..].trim_start();
                    let end = argument
                        .find([',', ')'])
                        .unwrap_or_else(|| panic!("{}: unclosed {macro_name}", path.display()));
                    let argument = argument[..end].trim();
                    let name = if let Some(literal) = argument.strip_prefix('"') {
                        literal.trim_end_matches('"').to_owned()
                    } else {
                        let constant = argument.rsplit("::").next().unwrap_or(argument);
                        constants.get(constant).cloned().unwrap_or_else(|| {
                            panic!(
                                "{}: {macro_name}{argument}: no `const {constant}: &str` in {krate}; \
                                 teach this scan where the name comes from",
                                path.display()
                            )
                        })
                    };
                    if let Some(previous) = metrics.insert(name.clone(), kind) {
                        assert_eq!(previous, kind, "{name} is recorded as two kinds");
                    }
                }
            }
        }
    }
    metrics
}

/// The series names a Prometheus scrape sees for `metrics`, rendered by a
/// recorder built as `txoutbox-axum` builds its own (`PrometheusBuilder::new()`).
fn exported_series(metrics: &BTreeMap<String, Kind>) -> BTreeSet<String> {
    let recorder = PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    metrics::with_local_recorder(&recorder, || {
        for (name, kind) in metrics {
            match kind {
                Kind::Counter => metrics::counter!(name.clone()).increment(1),
                Kind::Gauge => metrics::gauge!(name.clone()).set(1.0),
                Kind::Histogram => metrics::histogram!(name.clone()).record(1.0),
            }
        }
    });
    handle
        .render()
        .lines()
        .filter(|line| !line.starts_with('#') && !line.trim().is_empty())
        .map(|line| {
            let end = line.find(['{', ' ']).unwrap_or(line.len());
            line[..end].to_owned()
        })
        .collect()
}

/// The metric names a PromQL expression selects: identifiers that are not
/// functions, aggregations, keywords, label names or strings.
fn promql_metrics(expr: &str) -> BTreeSet<String> {
    const AGGREGATIONS: [&str; 14] = [
        "sum",
        "min",
        "max",
        "avg",
        "count",
        "group",
        "stddev",
        "stdvar",
        "topk",
        "bottomk",
        "quantile",
        "count_values",
        "limitk",
        "limit_ratio",
    ];
    const LABEL_LISTS: [&str; 6] = [
        "by",
        "without",
        "on",
        "ignoring",
        "group_left",
        "group_right",
    ];
    const KEYWORDS: [&str; 8] = [
        "and", "or", "unless", "bool", "offset", "atan2", "inf", "nan",
    ];
    let chars: Vec<char> = expr.chars().collect();
    let mut names = BTreeSet::new();
    let mut i = 0;
    let skip_to = |from: usize, close: char| {
        let mut j = from + 1;
        while j < chars.len() && chars[j] != close {
            if chars[j] == '"' || chars[j] == '\'' {
                let quote = chars[j];
                j += 1;
                while j < chars.len() && chars[j] != quote {
                    j += if chars[j] == '\\' { 2 } else { 1 };
                }
            }
            j += 1;
        }
        j + 1
    };
    while i < chars.len() {
        let c = chars[i];
        match c {
            '"' | '\'' | '`' => i = skip_to(i, c),
            '{' => i = skip_to(i, '}'),
            '[' => i = skip_to(i, ']'),
            c if c.is_ascii_digit() || c == '.' => {
                while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '.') {
                    i += 1;
                }
            }
            c if c.is_ascii_alphabetic() || c == '_' || c == ':' => {
                let start = i;
                while i < chars.len()
                    && (chars[i].is_ascii_alphanumeric() || chars[i] == '_' || chars[i] == ':')
                {
                    i += 1;
                }
                let word: String = chars[start..i].iter().collect();
                let mut next = i;
                while next < chars.len() && chars[next].is_whitespace() {
                    next += 1;
                }
                let followed_by_paren = chars.get(next) == Some(&'(');
                if LABEL_LISTS.contains(&word.as_str()) {
                    if followed_by_paren {
                        i = skip_to(next, ')');
                    }
                } else if followed_by_paren
                    || AGGREGATIONS.contains(&word.as_str())
                    || KEYWORDS.contains(&word.as_str())
                {
                    // a function or an aggregation, or an operator
                } else {
                    names.insert(word);
                }
            }
            _ => i += 1,
        }
    }
    names
}

/// The metric names of a Grafana variable's `label_values(...)` query.
fn variable_metrics(query: &str) -> BTreeSet<String> {
    let Some(inner) = query
        .trim()
        .strip_prefix("label_values(")
        .and_then(|rest| rest.strip_suffix(')'))
    else {
        return promql_metrics(query);
    };
    // `label_values(label)` names no metric; `label_values(selector, label)`.
    match inner.rsplit_once(',') {
        Some((selector, _label)) => promql_metrics(selector),
        None => BTreeSet::new(),
    }
}

/// Every query of the dashboard (panel targets and variables), after its
/// schema essentials are checked.
fn dashboard_queries() -> Vec<(String, BTreeSet<String>)> {
    let dashboard: Value = serde_json::from_str(&read(&workspace_root().join(DASHBOARD)))
        .unwrap_or_else(|err| panic!("{DASHBOARD}: {err}"));
    for key in ["title", "uid"] {
        assert!(
            dashboard[key]
                .as_str()
                .is_some_and(|value| !value.is_empty()),
            "{DASHBOARD}: no {key}"
        );
    }
    assert!(
        dashboard["schemaVersion"].as_u64().is_some_and(|v| v >= 36),
        "{DASHBOARD}: schemaVersion of a current Grafana"
    );
    let variables = dashboard["templating"]["list"]
        .as_array()
        .expect("templating.list");
    assert!(
        variables
            .iter()
            .any(|variable| variable["name"] == "datasource"
                && variable["type"] == "datasource"
                && variable["query"] == "prometheus"),
        "{DASHBOARD}: no Prometheus `datasource` variable"
    );
    let mut queries = Vec::new();
    for variable in variables.iter().filter(|v| v["type"] == "query") {
        let query = variable["query"]["query"]
            .as_str()
            .or_else(|| variable["query"].as_str())
            .expect("a query variable's query");
        queries.push((query.to_owned(), variable_metrics(query)));
    }
    let panels = dashboard["panels"].as_array().expect("panels");
    assert!(!panels.is_empty(), "{DASHBOARD}: no panels");
    for panel in panels {
        let title = panel["title"].as_str().unwrap_or("(untitled)");
        let kind = panel["type"].as_str();
        assert!(kind.is_some(), "{DASHBOARD}: panel {title} has no type");
        if kind == Some("row") {
            continue;
        }
        assert_eq!(
            panel["datasource"]["uid"], "${datasource}",
            "{DASHBOARD}: panel {title} does not query ${{datasource}}"
        );
        let targets = panel["targets"].as_array().expect("targets");
        assert!(
            !targets.is_empty(),
            "{DASHBOARD}: panel {title} has no targets"
        );
        for target in targets {
            let expr = target["expr"]
                .as_str()
                .filter(|expr| !expr.trim().is_empty())
                .unwrap_or_else(|| panic!("{DASHBOARD}: panel {title}: a target without expr"));
            queries.push((expr.to_owned(), promql_metrics(expr)));
        }
    }
    queries
}

/// One alert rule, read from the rules file.
#[derive(Default)]
struct Rule {
    name: String,
    fields: BTreeMap<String, String>,
}

/// The alert rules, read line by line (the file keeps to plain `key: value`
/// lines and folded or literal blocks; `promtool check rules` checks the YAML
/// itself): each rule's expression, `for:`, severity and annotations.
fn alert_rules() -> Vec<Rule> {
    let text = read(&workspace_root().join(ALERTS));
    let lines: Vec<&str> = text.lines().collect();
    let mut rules: Vec<Rule> = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let indent = line.len() - line.trim_start().len();
        let trimmed = line.trim();
        i += 1;
        if trimmed.starts_with('#') {
            continue;
        }
        if let Some(name) = trimmed.strip_prefix("- alert:") {
            rules.push(Rule {
                name: name.trim().to_owned(),
                ..Rule::default()
            });
            continue;
        }
        let Some(rule) = rules.last_mut() else {
            continue;
        };
        let Some((key, value)) = trimmed.split_once(':') else {
            continue;
        };
        let mut value = value.trim().to_owned();
        if ["|", "|-", ">", ">-"].contains(&value.as_str()) {
            let mut block = Vec::new();
            while i < lines.len()
                && (lines[i].trim().is_empty()
                    || lines[i].len() - lines[i].trim_start().len() > indent)
            {
                block.push(lines[i].trim());
                i += 1;
            }
            value = block.join(" ").trim().to_owned();
        }
        let value = value.trim_matches('"').to_owned();
        rule.fields.insert(key.trim().to_owned(), value);
    }
    rules
}

#[test]
fn every_query_names_a_metric_the_library_exports() {
    let metrics = library_metrics();
    // The scan finds the metrics the crates name as constants.
    for name in [
        txoutbox_core::processor::metrics::PUBLISHED,
        txoutbox_core::processor::metrics::OLDEST_PENDING_AGE,
        txoutbox_nats::subscriber::metrics::HANDLED_TOTAL,
        txoutbox_nats::subscriber::metrics::HELD_AGGREGATES,
    ] {
        assert!(
            metrics.contains_key(name),
            "the scan missed {name}: {metrics:?}"
        );
    }
    let exported = exported_series(&metrics);

    let mut used = BTreeSet::new();
    let mut unknown = Vec::new();
    for (expr, names) in dashboard_queries() {
        assert!(
            !names.is_empty() || expr.starts_with("label_values("),
            "{DASHBOARD}: `{expr}` names no metric"
        );
        for name in names {
            if !exported.contains(&name) {
                unknown.push(format!("{DASHBOARD}: {name} in `{expr}`"));
            }
            used.insert(name);
        }
    }
    let rules = alert_rules();
    assert!(!rules.is_empty(), "{ALERTS}: no alert rules");
    for rule in &rules {
        for field in [
            "expr",
            "for",
            "severity",
            "summary",
            "description",
            "runbook_url",
        ] {
            assert!(
                rule.fields
                    .get(field)
                    .is_some_and(|value| !value.is_empty()),
                "{ALERTS}: alert {} has no {field}",
                rule.name
            );
        }
        let expr = &rule.fields["expr"];
        let names = promql_metrics(expr);
        assert!(
            !names.is_empty(),
            "{ALERTS}: alert {} names no metric",
            rule.name
        );
        for name in names {
            if !exported.contains(&name) {
                unknown.push(format!("{ALERTS}: {name} in alert {}", rule.name));
            }
            used.insert(name);
        }
    }
    assert!(
        unknown.is_empty(),
        "queries name metrics the library does not export (it exports {exported:?}):\n{}",
        unknown.join("\n")
    );

    let unused: Vec<&String> = metrics
        .keys()
        .filter(|name| {
            !used.iter().any(|used| {
                used == *name
                    || used
                        .strip_prefix(name.as_str())
                        .is_some_and(|s| s == "_sum" || s == "_count")
            })
        })
        .collect();
    println!(
        "{} library metrics; the dashboard and {} alert rules name {} series; \
         exported and used by neither: {unused:?}",
        metrics.len(),
        rules.len(),
        used.len()
    );
}

#[test]
fn promql_names_are_found_and_nothing_else() {
    let names = promql_metrics(
        r#"sum by (job, consumer) (rate(a_total{outcome=~"x|y", job="$job"}[$__rate_interval])) / on () group_left (kind) max without (quantile) (b_seconds{quantile="0.99"}) unless c offset 5m or vector(0) > bool 1.5e3"#,
    );
    assert_eq!(
        names,
        ["a_total", "b_seconds", "c"]
            .map(String::from)
            .into_iter()
            .collect()
    );
    assert_eq!(
        variable_metrics(r#"label_values(d_total{job=~"$job"}, consumer)"#),
        ["d_total".to_owned()].into_iter().collect()
    );
    assert!(variable_metrics("label_values(job)").is_empty());
}
