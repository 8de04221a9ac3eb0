//! Figures against their targets: one PASS/MISS line each, printed per part
//! and again together at the end of a run.

use std::fmt;

/// A measured figure and the target it is held to.
#[derive(Debug, Clone)]
pub(crate) struct Check {
    /// What was measured.
    pub(crate) what: String,
    /// The figure, formatted.
    pub(crate) figure: String,
    /// The target, formatted.
    pub(crate) target: String,
    /// Whether the figure meets the target.
    pub(crate) pass: bool,
}

impl Check {
    /// `figure` against `target`, `pass` when it meets it.
    pub(crate) fn new(
        what: impl Into<String>,
        figure: impl Into<String>,
        target: impl Into<String>,
        pass: bool,
    ) -> Self {
        Self {
            what: what.into(),
            figure: figure.into(),
            target: target.into(),
            pass,
        }
    }
}

impl fmt::Display for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "  {:<4}  {:<58} {:>22}   target {}",
            if self.pass { "PASS" } else { "MISS" },
            self.what,
            self.figure,
            self.target
        )
    }
}

/// Prints `checks` under a heading.
pub(crate) fn print(heading: &str, checks: &[Check]) {
    if checks.is_empty() {
        return;
    }
    println!("-- {heading}");
    for check in checks {
        println!("{check}");
    }
}

/// Thousands with commas: `28,412`.
pub(crate) fn thousands(value: f64) -> String {
    let rounded = value.round() as i64;
    let digits = rounded.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    if rounded < 0 {
        out.insert(0, '-');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::thousands;

    #[test]
    fn groups_digits() {
        assert_eq!(thousands(0.0), "0");
        assert_eq!(thousands(999.4), "999");
        assert_eq!(thousands(28_412.0), "28,412");
        assert_eq!(thousands(1_000_000.0), "1,000,000");
    }
}
