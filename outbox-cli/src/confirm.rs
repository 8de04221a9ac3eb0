//! Asking before a change: on a terminal, a y/N question; without one, a
//! refusal unless `--yes` was given.

use std::io::{BufRead, IsTerminal, Write};

use crate::error::CliError;

/// Goes on if `yes`, or if the operator answers y to `change` (e.g.
/// "requeue 3 dead messages") on the terminal; fails with
/// [`CliError::Declined`] on any other answer and with
/// [`CliError::NeedsYes`] when stdin is not a terminal.
pub(crate) fn confirm(change: &str, yes: bool) -> Result<(), CliError> {
    if yes {
        return Ok(());
    }
    let stdin = std::io::stdin();
    if !stdin.is_terminal() {
        return Err(CliError::NeedsYes(change.to_owned()));
    }
    let mut stderr = std::io::stderr();
    write!(stderr, "{change}? [y/N] ")?;
    stderr.flush()?;
    let mut answer = String::new();
    stdin.lock().read_line(&mut answer)?;
    if is_yes(&answer) {
        Ok(())
    } else {
        Err(CliError::Declined)
    }
}

fn is_yes(answer: &str) -> bool {
    matches!(answer.trim().to_lowercase().as_str(), "y" | "yes")
}

/// Who is making a change, for the record: `$USER@host` (or `$LOGNAME`,
/// and the host from the kernel or `$HOSTNAME`), as far as they are known.
pub(crate) fn operator() -> String {
    let user = ["USER", "LOGNAME", "USERNAME"]
        .iter()
        .find_map(|var| std::env::var(var).ok().filter(|v| !v.is_empty()))
        .unwrap_or_else(|| "unknown".to_owned());
    let host = ["/proc/sys/kernel/hostname", "/etc/hostname"]
        .iter()
        .find_map(|path| std::fs::read_to_string(path).ok())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|host| host.trim().to_owned())
        .filter(|host| !host.is_empty());
    match host {
        Some(host) => format!("{user}@{host}"),
        None => user,
    }
}

#[cfg(test)]
mod tests {
    use super::is_yes;

    #[test]
    fn only_yes_is_yes() {
        assert!(is_yes("y\n"));
        assert!(is_yes(" YES \n"));
        assert!(!is_yes("\n"));
        assert!(!is_yes("n\n"));
        assert!(!is_yes("yep\n"));
    }
}
