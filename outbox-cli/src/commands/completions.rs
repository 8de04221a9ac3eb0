//! `outbox completions SHELL`: a completion script on stdout.

use clap_complete::Shell;

pub(super) fn print(shell: Shell) {
    clap_complete::generate(
        shell,
        &mut super::command(),
        "outbox",
        &mut std::io::stdout(),
    );
}
