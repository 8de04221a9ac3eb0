//! The names the docs give to crates are the workspace's: every package's
//! library carries the package's name, every `cargo ... -p NAME` (and
//! `--package`, `cargo install`) in the docs, scripts and doc comments names
//! a package of this workspace, and every dependency line of a `toml` block
//! in the Markdown docs names a published package of ours, with features it
//! has (a line naming plain `outbox-*`, an unrelated family of crates on
//! crates.io, fails), and every feature the docs tell users to enable on
//! one line (`txoutbox = { .., features = [..] }` in prose, doc comments
//! and manifest comments; `"txoutbox/NAME"` in a feature list) exists.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// One package of the workspace, as `cargo metadata` sees it.
struct Package {
    publish: bool,
    features: BTreeSet<String>,
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ is inside the workspace")
        .to_path_buf()
}

fn metadata() -> Value {
    let output = Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(workspace_root())
        .output()
        .expect("cargo metadata runs");
    assert!(
        output.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("cargo metadata prints JSON")
}

fn packages(metadata: &Value) -> BTreeMap<String, Package> {
    let list = metadata["packages"].as_array().expect("packages");
    list.iter()
        .map(|package| {
            let name = package["name"].as_str().expect("name").to_owned();
            // `publish`: null means "anywhere", [] means "nowhere".
            let publish = match &package["publish"] {
                Value::Null => true,
                Value::Array(registries) => !registries.is_empty(),
                _ => false,
            };
            let mut features: BTreeSet<String> = package["features"]
                .as_object()
                .expect("features")
                .keys()
                .cloned()
                .collect();
            // Optional dependencies without `dep:` are features too; ours
            // all use `dep:`, so only the declared names count.
            features.remove("default");
            (name, Package { publish, features })
        })
        .collect()
}

/// The files the docs live in: Markdown, scripts, manifests and Rust
/// sources (their doc comments), tracked by git.
fn doc_files() -> Vec<PathBuf> {
    let root = workspace_root();
    let output = Command::new("git")
        .args(["ls-files", "-z"])
        .current_dir(&root)
        .output()
        .expect("git ls-files runs");
    assert!(output.status.success(), "git ls-files failed");
    String::from_utf8(output.stdout)
        .expect("paths are UTF-8")
        .split('\0')
        // The CHANGELOG's history keeps the names of its day; this file
        // names patterns, not packages.
        .filter(|path| {
            !path.is_empty()
                && *path != "CHANGELOG.md"
                && *path != "tests/tests/setup/docs_name_packages.rs"
        })
        .filter(|path| {
            path.ends_with(".md")
                || path.ends_with(".rs")
                || path.ends_with(".sh")
                || path.ends_with(".toml")
                || path.starts_with(".ci/")
        })
        .map(|path| root.join(path))
        .filter(|path| path.exists())
        .collect()
}

/// `NAME` in `cargo ... -p NAME`, `--package NAME`, and `cargo install NAME`
/// when NAME is one of ours (`txoutbox*`, `outbox*`; other tools install too).
fn cargo_package_mentions(line: &str) -> Vec<String> {
    if !line.contains("cargo ") {
        return Vec::new();
    }
    let words: Vec<&str> = line
        .split(|c: char| c.is_whitespace() || c == '`' || c == '"' || c == '\'')
        .filter(|word| !word.is_empty())
        .collect();
    let mut names = Vec::new();
    for (index, pair) in words.windows(2).enumerate() {
        let named = match pair[0] {
            "-p" | "--package" => true,
            "install" => index > 0 && words[index - 1] == "cargo" && pair[1].contains("outbox"),
            _ => false,
        };
        if named {
            let name = pair[1].trim_end_matches([',', ';', ')', '.', ':']);
            if name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            {
                names.push(name.to_owned());
            }
        }
    }
    names
}

/// `(name, features)` of each dependency line in the ```toml blocks of a
/// Markdown text that names one of ours or a plain `outbox-*` crate.
fn toml_dependency_lines(text: &str) -> Vec<(usize, String, Vec<String>)> {
    let mut found = Vec::new();
    let mut in_toml = false;
    for (number, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") {
            in_toml = !in_toml && trimmed.trim_start_matches('`').starts_with("toml");
            continue;
        }
        if !in_toml || trimmed.starts_with('#') {
            continue;
        }
        let Some((key, value)) = trimmed.split_once('=') else {
            continue;
        };
        let name = key.trim();
        if !(name.starts_with("txoutbox") || name.starts_with("outbox")) {
            continue;
        }
        let features = value
            .split_once("features")
            .and_then(|(_, rest)| rest.split_once('[').map(|(_, list)| list))
            .and_then(|list| list.split_once(']').map(|(inside, _)| inside))
            .map(|inside| {
                inside
                    .split(',')
                    .map(|feature| feature.trim().trim_matches('"').to_owned())
                    .filter(|feature| !feature.is_empty())
                    .collect()
            })
            .unwrap_or_default();
        found.push((number + 1, name.to_owned(), features));
    }
    found
}

/// `(package, feature)` for each feature a line tells users to enable: the
/// `features = [..]` of an inline `txoutbox* = { .. }` dependency, and each
/// `"PACKAGE/FEATURE"` of any feature list whose package is one of ours
/// (`txoutbox*`) or looks like it (`outbox-*`, which is a folder, not a
/// package).
fn enabled_features(line: &str) -> Vec<(String, String)> {
    let mut found = Vec::new();
    for (start, _) in line.match_indices("txoutbox") {
        let before = line[..start].chars().next_back();
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '/') {
            continue;
        }
        let rest = &line[start..];
        let name_len = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_'))
            .unwrap_or(rest.len());
        let (name, after) = rest.split_at(name_len);
        let Some(table) = after.trim_start().strip_prefix('=') else {
            continue;
        };
        let Some(table) = table.trim_start().strip_prefix('{') else {
            continue;
        };
        let table = table.split_once('}').map_or(table, |(inside, _)| inside);
        for feature in feature_list(table) {
            if !feature.contains('/') {
                found.push((name.to_owned(), feature));
            }
        }
    }
    let mut rest = line;
    while let Some(index) = rest.find("features") {
        rest = &rest[index + "features".len()..];
        for feature in feature_list(&format!("features{rest}")) {
            if let Some((package, name)) = feature.split_once('/') {
                let package = package.trim_end_matches('?');
                if package.starts_with("txoutbox") || package.starts_with("outbox-") {
                    found.push((package.to_owned(), name.to_owned()));
                }
            }
        }
    }
    found
}

/// The names in the first `features = [..]` of `text`.
fn feature_list(text: &str) -> Vec<String> {
    text.split_once("features")
        .map(|(_, rest)| rest.trim_start())
        .and_then(|rest| rest.strip_prefix('='))
        .and_then(|rest| rest.trim_start().strip_prefix('['))
        .and_then(|list| list.split_once(']').map(|(inside, _)| inside))
        .map(|inside| {
            inside
                .split(',')
                .map(|feature| feature.trim().trim_matches('"').to_owned())
                .filter(|feature| !feature.is_empty())
                .collect()
        })
        .unwrap_or_default()
}

/// The lines of a doc file that speak to users: every line of Markdown,
/// the comments of Rust sources and manifests (not their code: a manifest's
/// own lines are checked by cargo).
fn user_facing_lines(path: &Path, text: &str) -> Vec<(usize, String)> {
    let extension = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    text.lines()
        .enumerate()
        .filter(|(_, line)| {
            let trimmed = line.trim_start();
            match extension {
                "md" => true,
                "rs" => trimmed.starts_with("//"),
                "toml" => trimmed.starts_with('#'),
                _ => false,
            }
        })
        .map(|(number, line)| (number + 1, line.to_owned()))
        .collect()
}

#[test]
fn every_package_and_its_library_share_one_name() {
    let metadata = metadata();
    for package in metadata["packages"].as_array().expect("packages") {
        let name = package["name"].as_str().expect("name");
        for target in package["targets"].as_array().expect("targets") {
            let kinds: Vec<&str> = target["kind"]
                .as_array()
                .expect("kind")
                .iter()
                .filter_map(Value::as_str)
                .collect();
            if kinds
                .iter()
                .any(|kind| *kind == "lib" || *kind == "proc-macro")
            {
                assert_eq!(
                    target["name"].as_str(),
                    Some(name.replace('-', "_").as_str()),
                    "the library of {name} must be named as its package"
                );
            }
        }
    }
}

#[test]
fn cargo_commands_in_the_docs_name_packages_of_the_workspace() {
    let packages = packages(&metadata());
    let mut wrong = Vec::new();
    let mut seen = 0;
    for path in doc_files() {
        let text = std::fs::read_to_string(&path).expect("readable");
        for (number, line) in text.lines().enumerate() {
            for name in cargo_package_mentions(line) {
                seen += 1;
                if !packages.contains_key(&name) {
                    wrong.push(format!("{}:{}: {name}", path.display(), number + 1));
                }
            }
        }
    }
    assert!(
        seen > 10,
        "the docs name packages in cargo commands: {seen} found"
    );
    assert!(
        wrong.is_empty(),
        "cargo commands naming no package of ours:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn dependency_lines_in_the_docs_name_published_packages_and_their_features() {
    let packages = packages(&metadata());
    let mut wrong = Vec::new();
    let mut seen = 0;
    for path in doc_files()
        .into_iter()
        .filter(|path| path.extension().is_some_and(|e| e == "md"))
    {
        let text = std::fs::read_to_string(&path).expect("readable");
        for (number, name, features) in toml_dependency_lines(&text) {
            seen += 1;
            let place = format!("{}:{number}", path.display());
            match packages.get(&name) {
                Some(package) if package.publish => {
                    for feature in features {
                        if !package.features.contains(&feature) {
                            wrong.push(format!("{place}: {name} has no feature {feature}"));
                        }
                    }
                }
                Some(_) => wrong.push(format!("{place}: {name} is not published")),
                None => wrong.push(format!(
                    "{place}: {name} is not a package of this workspace"
                )),
            }
        }
    }
    assert!(seen > 0, "the README's installation has dependency lines");
    assert!(
        wrong.is_empty(),
        "dependency lines in the docs:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn features_the_docs_tell_users_to_enable_exist() {
    let packages = packages(&metadata());
    let mut wrong = Vec::new();
    let mut seen = 0;
    for path in doc_files() {
        let text = std::fs::read_to_string(&path).expect("readable");
        for (number, line) in user_facing_lines(&path, &text) {
            for (name, feature) in enabled_features(&line) {
                seen += 1;
                let place = format!("{}:{number}", path.display());
                match packages.get(&name) {
                    Some(package) if package.features.contains(&feature) => {}
                    Some(_) => wrong.push(format!("{place}: {name} has no feature {feature}")),
                    None => wrong.push(format!(
                        "{place}: {name}/{feature}: {name} is not a package of this workspace"
                    )),
                }
            }
        }
    }
    assert!(
        seen > 10,
        "the docs tell users which features to enable: {seen} found"
    );
    assert!(
        wrong.is_empty(),
        "features the docs name:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_scanners_find_what_they_look_for() {
    assert_eq!(
        cargo_package_mentions("`cargo run --release -p txoutbox-bench -- drain`"),
        ["txoutbox-bench"]
    );
    assert_eq!(
        cargo_package_mentions("cargo install txoutbox-cli --locked"),
        ["txoutbox-cli"]
    );
    assert!(cargo_package_mentions("run with -p on the shell").is_empty());
    assert!(cargo_package_mentions("cargo test (it says what to install)").is_empty());
    assert!(cargo_package_mentions("cargo install cargo-hack --locked").is_empty());
    let lines = toml_dependency_lines(
        "```toml\n[dependencies]\noutbox-core = { version = \"0.1\", features = [\"schema\"] }\n```\n",
    );
    assert_eq!(
        lines,
        [(3, "outbox-core".to_owned(), vec!["schema".to_owned()])]
    );
    assert_eq!(
        enabled_features(
            "`txoutbox = { version = \"0.1\", features = [\"postgres\", \"nats\"] }` and"
        ),
        [
            ("txoutbox".to_owned(), "postgres".to_owned()),
            ("txoutbox".to_owned(), "nats".to_owned())
        ]
    );
    assert_eq!(
        enabled_features("my-crate = { features = [\"outbox-core/opentelemetry\"] }"),
        [("outbox-core".to_owned(), "opentelemetry".to_owned())]
    );
    assert!(enabled_features("use txoutbox::testing; txoutbox_core = 1").is_empty());
}
