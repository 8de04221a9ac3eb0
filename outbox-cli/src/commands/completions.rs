//! `outbox completions SHELL`: a completion script on stdout.

use clap::CommandFactory;
use clap_complete::Shell;

use super::Cli;

pub(super) fn print(shell: Shell) {
    clap_complete::generate(shell, &mut Cli::command(), "outbox", &mut std::io::stdout());
}
