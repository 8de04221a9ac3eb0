//! `outbox completions SHELL`: a completion script on stdout.

use clap_complete::Shell;

use crate::opt;

pub(super) fn print(shell: Shell) {
    clap_complete::generate(shell, &mut opt::command(), "outbox", &mut std::io::stdout());
}
