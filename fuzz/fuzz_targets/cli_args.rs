//! The `outbox` command line: its clap tree (`outbox-cli/src/opt`, built
//! into this target as it is), with its value parsers of message ids and
//! durations; the input is the arguments, one a line. And the redaction of
//! every argument as a URL, as the command prints URLs.
//!
//! Properties: clap's own checks of the tree hold; a parsed id is one of
//! the arguments and displays as an id that parses back; a parsed duration
//! is an argument's (or a default's) reading and its humantime form reads
//! back to it; the parsed command line's `Debug` does not change when the
//! NATS password, token or nkey does; a URL is redacted as documented, and
//! redacting twice changes nothing.

#![no_main]
#![allow(dead_code, unused_imports)]

#[path = "../../outbox-cli/src/help.rs"]
mod help;
#[path = "../../outbox-cli/src/opt/mod.rs"]
mod opt;

use std::time::Duration;

use clap::FromArgMatches;
use libfuzzer_sys::fuzz_target;
use txoutbox_core::MessageId;
use txoutbox_core::redact::redact_url;
use txoutbox_fuzz::rules;

use opt::{Cli, Command, Dead, PurgeInbox, StreamCommand};

/// The defaults of the duration options, as the tree declares them.
const DURATION_DEFAULTS: [&str; 4] = ["5m", "2m", "0s", "3s"];
/// The options whose values are secrets.
const SECRETS: [&str; 3] = ["--nats-password", "--nats-token", "--nats-nkey"];

fuzz_target!(|bytes: &[u8]| {
    static TREE: std::sync::Once = std::sync::Once::new();
    TREE.call_once(|| opt::command().debug_assert());
    let Ok(text) = std::str::from_utf8(bytes) else {
        return;
    };
    let args: Vec<&str> = text.split('\n').collect();
    for arg in &args {
        let redacted = redact_url(arg);
        assert_eq!(redacted, rules::redacted_url(arg), "{arg:?}");
        assert_eq!(redact_url(&redacted), redacted);
    }
    let Some(cli) = parse(&args) else {
        return;
    };
    let values: Vec<&str> = args
        .iter()
        .flat_map(|arg| [*arg, arg.split_once('=').map_or(*arg, |(_, value)| value)])
        .collect();
    for id in ids(&cli.command) {
        assert!(
            values.iter().any(|v| v.parse::<MessageId>() == Ok(id)),
            "{id} is no argument"
        );
        assert_eq!(id.to_string().parse::<MessageId>(), Ok(id));
    }
    for duration in durations(&cli.command) {
        let read = |v: &&str| humantime::parse_duration(v).ok() == Some(duration);
        assert!(
            values.iter().any(read) || DURATION_DEFAULTS.iter().any(read),
            "{duration:?} is no argument"
        );
        let shown = humantime::format_duration(duration).to_string();
        assert_eq!(
            humantime::parse_duration(&shown).ok(),
            Some(duration),
            "{shown}"
        );
    }
    secrets_unseen(&args, &cli);
});

fn parse(args: &[&str]) -> Option<Cli> {
    let argv = std::iter::once("outbox").chain(args.iter().copied());
    let matches = opt::command().try_get_matches_from(argv).ok()?;
    Some(Cli::from_arg_matches(&matches).expect("matches of the tree make its Cli"))
}

fn ids(command: &Command) -> Vec<MessageId> {
    match command {
        Command::Dead(Dead::Show { id }) | Command::Dead(Dead::Skip { id, .. }) => vec![*id],
        Command::Dead(Dead::Requeue { ids, .. }) => ids.clone(),
        _ => Vec::new(),
    }
}

fn durations(command: &Command) -> Vec<Duration> {
    match command {
        Command::Purge(purge) => {
            let mut all: Vec<Duration> = purge.published_before.into_iter().collect();
            if let Some(PurgeInbox::Inbox { before, .. }) = &purge.inbox {
                all.push(*before);
            }
            all
        }
        Command::Verify(verify) => {
            let mut all: Vec<Duration> = verify.since.into_iter().collect();
            all.push(verify.pending_older_than);
            all
        }
        Command::Stream(StreamCommand::Ensure(ensure)) => {
            vec![ensure.duplicate_window, ensure.max_age, ensure.lease]
        }
        _ => Vec::new(),
    }
}

/// The same command line with other secrets prints the same.
fn secrets_unseen(args: &[&str], cli: &Cli) {
    let mut replaced: Vec<String> = Vec::with_capacity(args.len());
    let mut changed = false;
    for (i, arg) in args.iter().enumerate() {
        let after_secret = i > 0 && SECRETS.contains(&args[i - 1]);
        let inline = SECRETS
            .iter()
            .find_map(|s| arg.strip_prefix(s)?.strip_prefix('=').map(|_| *s));
        replaced.push(match inline {
            Some(option) => format!("{option}=other-secret"),
            None if after_secret && *arg != "other-secret" => "other-secret".to_owned(),
            None => (*arg).to_owned(),
        });
        changed |= replaced[i] != *arg;
    }
    if !changed {
        return;
    }
    let replaced: Vec<&str> = replaced.iter().map(String::as_str).collect();
    let Some(other) = parse(&replaced) else {
        return;
    };
    assert_eq!(
        format!("{cli:?}"),
        format!("{other:?}"),
        "a secret shows in Debug"
    );
}
