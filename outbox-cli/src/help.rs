//! The long help: what each command does, with examples, and the
//! environment and exit codes, so `outbox help COMMAND` reads like a man
//! page.

/// `outbox --help`.
pub(crate) const ABOUT: &str = "\
The operator's view of a transactional outbox and its consumers' inboxes.

Reads and changes the outbox table (default outbox_messages) and the inbox
tables (outbox_inbox, outbox_inbox_held) of a PostgreSQL, MariaDB/MySQL or
SQLite database, without writing SQL. Read commands take --json. Commands
that change something (dead requeue, dead skip, release, purge) ask first on
a terminal; elsewhere they need --yes.

Examples:
  outbox status --watch
  outbox dead list
  outbox dead show 0195d3a2-...
  outbox dead skip 0195d3a2-... --reason 'order cancelled by hand' --yes
  outbox aggregate order 42
  outbox purge --published-before 7d --yes";

/// After every help page.
pub(crate) const AFTER_HELP: &str = "\
Environment:
  DATABASE_URL        the database (postgres://, mysql://, sqlite://); or --database-url
                      (PostgreSQL schema: ?options=-csearch_path%3Dmy_schema)
  OUTBOX_TABLE        the outbox table; or --table
  OUTBOX_INBOX_TABLE  the inbox table; or --inbox-table
  USER                who `dead skip` records (with the host name) unless --by

Exit codes:
  0  done
  1  failed: database unreachable, missing table, unknown id, ...
  2  bad usage; or a change without --yes and no terminal to ask on
  3  answered no at the prompt: nothing changed";

/// `outbox status`.
pub(crate) const STATUS: &str = "\
Counts of pending, leased, dead, skipped and delayed (recorded with a delay,
not due yet) messages, how many aggregates wait behind a dead message, how
long the oldest due message that nothing holds back has waited (delayed
messages and those behind a dead message do not count: a high value is a
stall), counts per event name and per aggregate type, and the aggregates held
back behind a dead message or one backing off after a failed publish, with how
many messages wait behind each.

Past 10,000 pending messages the pending count is an estimate (marked ~) and
the per-event and per-type pending counts cover the oldest 10,000.

Examples:
  outbox status
  outbox status --json
  outbox status --watch       redraw every 2 s until Ctrl-C
  outbox status --watch 10";

/// `outbox aggregate`.
pub(crate) const AGGREGATE: &str = "\
One aggregate's unsettled messages (pending, leased, backing off, dead) in
sequence order, and what holds them back: a dead head, a backoff until a
time, or a lease a processor holds until a time.

Examples:
  outbox aggregate order 42
  outbox aggregate order 42 --json";

/// `outbox purge`.
pub(crate) const PURGE: &str = "\
Deletes published messages, and skipped ones, settled longer ago than AGE; or
(purge inbox) a consumer's inbox records processed longer ago than AGE. Rows
go in batches (--batch-size), so no statement runs long or holds many locks;
a progress bar shows on a terminal, a line per batch otherwise. Pending and
dead messages are never purged.

AGE: 7d, 12h, 90min, 1week ...

Examples:
  outbox purge --published-before 7d
  outbox purge --published-before 30d --batch-size 5000 --yes
  outbox purge inbox --consumer billing --before 14d --yes";

/// `outbox holds`.
pub(crate) const HOLDS: &str = "\
A consumer's aggregates held behind a message it could not apply (with
keep_order, a dead-lettered message holds its aggregate: later messages are
parked in <inbox>_held until an operator releases it).

Example:
  outbox holds --consumer billing";

/// `outbox release`.
pub(crate) const RELEASE: &str = "\
Releases a held aggregate of a consumer: its subscriber applies the message
the aggregate is held behind again (or, with --skip, leaves it unapplied for
good), then what is parked, in order, within a second.

With --all instead of TYPE ID, releases every held aggregate of the consumer
not released yet, the same way (retry, or --skip for all), narrowed by
--aggregate-type, --reason (text the hold's reason contains, ignoring case),
--held-before and --held-after (an age, 2h: held more than / less than two
hours ago, or a time, 2026-11-28T09:00:00Z). It shows how many and the first
few, asks (or needs --yes), then releases them oldest hold first,
--batch-size holds per UPDATE statement. Only holds already held when it
starts are released: one that a retried message holds again meanwhile waits
for you. `outbox holds --consumer NAME` lists them all.

Examples:
  outbox release --consumer billing order 42
  outbox release --consumer billing order 42 --skip --yes
  outbox release --consumer billing --all
  outbox release --consumer billing --all --aggregate-type order \\
      --reason 'payment service' --held-after 2h --yes";

/// `outbox console`.
pub(crate) const CONSOLE: &str = "\
Serves the web console on --listen (default 127.0.0.1:8089) until Ctrl-C:
the overview (backlog, publish rate, blocked aggregates), dead messages,
the consumers named with --consumer (lag from NATS, held aggregates) and
verify against --stream. No processor or subscriber runs here: their health
is on the service's own console.

It refuses an address other than loopback unless --allow-public, and is
read-only unless --allow-changes: then every change (requeue, skip,
release, verify) is confirmed on its own page and recorded as --operator
(default $USER@host).

Examples:
  outbox console
  outbox console --stream ORDERS --consumer billing --nats-url nats://127.0.0.1:4222
  outbox console --allow-changes --operator alice@ops";

/// `outbox migrate`.
pub(crate) const MIGRATE: &str = "\
Applies the migrations shipped with this version to the tables named by
--table and --inbox-table, recording them in outbox_migrations. Running it
again applies only what is new (nothing, when up to date).

Example:
  DATABASE_URL=postgres://app@db/app outbox migrate";

/// `outbox completions`.
pub(crate) const COMPLETIONS: &str = "\
Prints a completion script for SHELL on stdout.

Examples:
  outbox completions bash > /etc/bash_completion.d/outbox
  outbox completions zsh > \"${fpath[1]}/_outbox\"
  outbox completions fish > ~/.config/fish/completions/outbox.fish";

/// `outbox dead list`.
pub(crate) const DEAD_LIST: &str = "\
The oldest dead messages (those that will not be retried), why each died, and
how many later messages of its aggregate wait behind it. With --skipped, the
most recently skipped messages instead, with who skipped them and why.

Examples:
  outbox dead list
  outbox dead list --skipped --json";

/// `outbox dead show`.
pub(crate) const DEAD_SHOW: &str = "\
One message in full: its envelope (id, event name and version, aggregate,
sequence, subject, times, attempts), headers, payload (pretty-printed when it
is JSON), last error, state, and the messages of its aggregate that wait
behind it. Any message can be shown, dead or not.

Example:
  outbox dead show 0195d3a2-7c1e-7b11-9a8f-3c1d2e4f5a6b";

/// `outbox dead requeue`.
pub(crate) const DEAD_REQUEUE: &str = "\
Puts dead messages back to pending with their attempts reset, once the cause
is fixed (a stream created, a limit raised); the processor publishes them and
what waited behind them, in order.

Examples:
  outbox dead requeue 0195d3a2-...
  outbox dead requeue --event order.placed --yes
  outbox dead requeue --all";

/// `outbox dead skip`.
pub(crate) const DEAD_SKIP: &str = "\
Marks a dead message as deliberately not published. The row is kept, with who
skipped it (--by, default $USER@host), why (--reason) and when, and is purged
with the published messages. Its aggregate is released: the processor
publishes the messages that waited behind it, in order. A skip cannot be
undone.

Example:
  outbox dead skip 0195d3a2-... --reason 'duplicate of 0195d3a1-...'";
