//! The README and the guide's chapters (`outbox/guide/*.md`, the modules of
//! `txoutbox::guide`) compile: every Rust block in them is a doctest of the
//! facade (`cargo test -p txoutbox --doc`). This test keeps it so:
//!
//! - the README's complete example is `examples/readme-service/src/main.rs`
//!   word for word, and its installation block lists exactly that crate's
//!   dependencies, so a service written from the README alone compiles;
//! - no Rust block in the README or a chapter is `ignore`d (a block rustdoc
//!   skips can rot), and every chapter file is a module of `txoutbox::guide`
//!   (a file no module includes is never compiled);
//! - no SQL in them, nor in any example, is built by formatting values into it.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("examples/ is inside the workspace")
        .to_path_buf()
}

fn read(relative: &str) -> String {
    let path = root().join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The chapters: `outbox/guide/*.md`, by file name.
fn chapters() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(root().join("outbox/guide"))
        .expect("outbox/guide/ exists")
        .map(|entry| {
            entry
                .expect("readable")
                .file_name()
                .into_string()
                .expect("UTF-8")
        })
        .filter(|name| name.ends_with(".md"))
        .collect();
    names.sort();
    names
}

/// The Markdown files whose Rust blocks must compile.
fn documents() -> Vec<(String, String)> {
    let mut documents = vec![("README.md".to_owned(), read("README.md"))];
    for name in chapters() {
        let relative = format!("outbox/guide/{name}");
        documents.push((relative.clone(), read(&relative)));
    }
    documents
}

/// `(line, info string, body)` of every fenced block of a Markdown text.
fn blocks(text: &str) -> Vec<(usize, String, String)> {
    let mut found = Vec::new();
    let mut open: Option<(usize, String, String)> = None;
    for (number, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        match open.take() {
            None if trimmed.starts_with("```") => {
                open = Some((number + 1, trimmed[3..].trim().to_owned(), String::new()));
            }
            None => {}
            Some(block) if trimmed.starts_with("```") => found.push(block),
            Some((start, info, mut body)) => {
                body.push_str(line);
                body.push('\n');
                open = Some((start, info, body));
            }
        }
    }
    assert!(open.is_none(), "an unclosed code block");
    found
}

/// Whether rustdoc treats a block with this info string as Rust.
fn is_rust(info: &str) -> bool {
    let words: Vec<&str> = info.split([',', ' ']).filter(|w| !w.is_empty()).collect();
    words.is_empty()
        || words.iter().all(|word| {
            matches!(
                *word,
                "rust" | "no_run" | "ignore" | "should_panic" | "compile_fail" | "standalone_crate"
            ) || word.starts_with("edition")
        })
}

#[test]
fn the_readme_shows_the_complete_example_word_for_word() {
    let readme = read("README.md");
    let service = read("examples/readme-service/src/main.rs");
    let block = blocks(&readme)
        .into_iter()
        .find(|(_, info, body)| is_rust(info) && body.contains("async fn on_paid"))
        .expect("the README's complete example (the block with `on_paid`)");
    assert!(
        block.2 == service,
        "README line {}: the complete example differs from examples/readme-service/src/main.rs; \
         copy the file again",
        block.0
    );
}

/// `(name, features)` of each dependency line under `[dependencies]`.
fn dependencies(toml: &str) -> Vec<(String, Vec<String>)> {
    let mut inside = false;
    let mut found = Vec::new();
    for line in toml.lines() {
        let line = line.split(" #").next().unwrap_or("").trim();
        if line.starts_with('[') {
            inside = line == "[dependencies]";
            continue;
        }
        let Some((name, value)) = line.split_once('=').filter(|_| inside) else {
            continue;
        };
        let features = value
            .split_once("features = [")
            .and_then(|(_, rest)| rest.split_once(']'))
            .map(|(list, _)| {
                list.split(',')
                    .map(|feature| feature.trim().trim_matches('"').to_owned())
                    .filter(|feature| !feature.is_empty())
                    .collect()
            })
            .unwrap_or_default();
        found.push((name.trim().to_owned(), features));
    }
    found
}

/// A service written from the README needs the dependencies its
/// installation section lists and nothing else: the README's complete
/// example is a crate whose dependencies are exactly those lines.
#[test]
fn the_readme_lists_every_dependency_of_its_complete_example() {
    let readme = read("README.md");
    let listed = blocks(&readme)
        .into_iter()
        .find(|(_, info, body)| info == "toml" && body.contains("txoutbox ="))
        .expect("the README's installation block");
    let manifest = read("examples/readme-service/Cargo.toml");
    assert_eq!(
        dependencies(&listed.2),
        dependencies(&manifest),
        "README line {}: the installation block and examples/readme-service/Cargo.toml \
         [dependencies] differ (names and features)",
        listed.0
    );
    assert!(dependencies(&manifest).len() >= 3, "{manifest}");
}

#[test]
fn every_rust_block_of_the_readme_and_the_guide_is_compiled() {
    let mut skipped = Vec::new();
    let mut rust = 0;
    for (path, text) in documents() {
        for (line, info, _) in blocks(&text) {
            if !is_rust(&info) {
                continue;
            }
            rust += 1;
            if info.split(',').any(|word| word.trim() == "ignore") {
                skipped.push(format!("{path}:{line}: ```{info}"));
            }
        }
    }
    assert!(
        rust > 20,
        "the README and the guide have Rust blocks: {rust} found"
    );
    assert!(
        skipped.is_empty(),
        "Rust blocks rustdoc would not compile (use `no_run` and hidden `#` lines instead):\n{}",
        skipped.join("\n")
    );
}

#[test]
fn every_chapter_is_a_module_of_the_guide_and_the_readme_links_it() {
    let guide = read("outbox/src/guide.rs");
    let lib = read("outbox/src/lib.rs");
    let readme = read("README.md");
    assert!(
        lib.contains("pub mod guide;"),
        "outbox/src/lib.rs declares the guide"
    );
    assert!(
        lib.contains("include_str!(\"../../README.md\")"),
        "the README is a doctest of the facade"
    );
    let chapters: Vec<String> = chapters()
        .into_iter()
        .filter(|name| name.ends_with(".md"))
        .collect();
    assert!(
        chapters.len() >= 9,
        "the guide has its chapters: {chapters:?}"
    );
    for name in chapters {
        let module = name.trim_end_matches(".md");
        assert!(
            guide.contains(&format!(
                "pub mod {module} {{\n    #![doc = include_str!(\"../guide/{name}\")]"
            )),
            "outbox/guide/{name} is not the module `txoutbox::guide::{module}`, so rustdoc never compiles it"
        );
        assert!(
            readme.contains(&format!("(outbox/guide/{name})"))
                && readme.contains(&format!("txoutbox/latest/txoutbox/guide/{module}/")),
            "the README's chapter table links outbox/guide/{name} and its docs.rs page"
        );
    }
}

/// The `.rs` files under `dir`, its subfolders included.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).expect("a folder of examples") {
        let path = entry.expect("a folder entry").path();
        if path.is_dir() {
            files.extend(rust_files(&path));
        } else if path.extension().is_some_and(|extension| extension == "rs") {
            files.push(path);
        }
    }
    files
}

#[test]
fn no_sql_in_the_docs_is_built_by_formatting() {
    let mut formatted = Vec::new();
    let mut documents = documents();
    documents.push((
        "outbox/guide/shop.rs".to_owned(),
        read("outbox/guide/shop.rs"),
    ));
    // Every example a user may copy from, not only the README's.
    for folder in [
        "examples/examples",
        "examples/src",
        "examples/readme-service/src",
    ] {
        for file in rust_files(&root().join(folder)) {
            let relative = file
                .strip_prefix(root())
                .expect("under the root")
                .display()
                .to_string();
            documents.push((relative.clone(), read(&relative)));
        }
    }
    for (path, text) in documents {
        for (number, line) in text.lines().enumerate() {
            let upper = line.to_uppercase();
            let sql = ["SELECT ", "INSERT ", "UPDATE ", "DELETE ", "CREATE "]
                .iter()
                .any(|keyword| upper.contains(keyword));
            if line.contains("format!(") && sql {
                formatted.push(format!("{path}:{}: {}", number + 1, line.trim()));
            }
        }
    }
    assert!(
        formatted.is_empty(),
        "SQL built with format! (bind the values: sea_query or Statement::from_sql_and_values):\n{}",
        formatted.join("\n")
    );
}

#[test]
fn the_block_scanner_reads_info_strings() {
    let text = "a\n```rust,no_run\nlet x = 1;\n```\n```toml\n[x]\n```\n```\nfn f() {}\n```\n";
    let found = blocks(text);
    assert_eq!(found.len(), 3);
    assert_eq!(
        found[0],
        (2, "rust,no_run".to_owned(), "let x = 1;\n".to_owned())
    );
    assert!(is_rust("rust,no_run") && is_rust("") && is_rust("rust,ignore"));
    assert!(!is_rust("toml") && !is_rust("text") && !is_rust("sh"));
}
