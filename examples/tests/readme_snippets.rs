//! The README's "Add the outbox to your service" is the code of
//! `examples/examples/add_to_service.rs`, which the workspace builds (and
//! CI runs): this test fails when the two drift apart, so the README's main
//! path always compiles.

use std::path::Path;

fn read(relative: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The first fenced block after `marker` in `text`, without its fences.
fn block_after<'a>(text: &'a str, marker: &str) -> &'a str {
    let from = text
        .find(marker)
        .unwrap_or_else(|| panic!("`{marker}` not in the README"));
    let fence = "```rust,ignore\n";
    let open = text[from..].find(fence).expect("an opening fence") + from + fence.len();
    let close = text[open..].find("```\n").expect("a closing fence") + open;
    &text[open..close]
}

/// The example's lines between its README markers, one indent level less.
fn example_region(example: &str) -> Vec<String> {
    let start = example
        .find("// README-BEGIN add-to-service\n")
        .expect("the begin marker")
        + "// README-BEGIN add-to-service\n".len();
    let end = example[start..]
        .find("// README-END add-to-service")
        .expect("the end marker")
        + start;
    example[start..end]
        .lines()
        .map(|line| line.strip_prefix("    ").unwrap_or(line).to_owned())
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .skip_while(|line| line.trim().is_empty())
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect()
}

#[test]
fn the_readme_shows_the_example_word_for_word() {
    let readme = read("../README.md");
    let example = read("examples/add_to_service.rs");
    let shown: Vec<&str> = block_after(&readme, "<!-- snippet: add-to-service")
        .lines()
        .collect();
    let region = example_region(&example);
    assert!(
        shown.len() > region.len(),
        "the README block is shorter than the example's region"
    );
    for (n, (shown, code)) in shown.iter().zip(&region).enumerate() {
        assert_eq!(
            shown,
            code,
            "README line {} differs from the example",
            n + 1
        );
    }
    // What the README shows after the region (the shutdown) is in the
    // example too, after its wait for the effect.
    for line in &shown[region.len()..] {
        assert!(
            example.contains(&format!("    {line}\n")),
            "README line `{line}` is not in the example"
        );
    }
    // And the handler, word for word.
    let handler = block_after(&readme, "with the handler, a plain `async fn`");
    assert!(
        example.contains(handler),
        "the README's handler differs from the example's:\n{handler}"
    );
}
