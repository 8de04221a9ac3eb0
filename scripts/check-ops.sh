#!/usr/bin/env bash
# The shipped dashboards and alert rules (ops/): `promtool check rules` and
# `promtool test rules` on the Prometheus alert rules, and the Grafana
# dashboard parsed as JSON with its essentials present. Installs promtool
# (Debian's `prometheus` package) when it is missing. That every query names
# a metric the library exports is the suite's test `ops_files`.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf 'check-ops: %s\n' "$*" >&2; }

RULES=ops/prometheus/outbox-alerts.yml
RULE_TESTS=ops/prometheus/outbox-alerts.test.yml
DASHBOARD=ops/grafana/outbox.json

install_promtool() {
  command -v promtool >/dev/null 2>&1 && return 0
  command -v apt-get >/dev/null 2>&1 || {
    log "missing 'promtool': install Prometheus (Debian: 'apt-get install -y prometheus')"
    return 1
  }
  log "installing promtool (apt-get install -y prometheus)"
  apt-get install -y --no-install-recommends prometheus >/dev/null \
    || { apt-get update >/dev/null && apt-get install -y --no-install-recommends prometheus >/dev/null; }
  promtool --version 2>&1 | head -n 1 >&2
}

check_dashboard() {
  command -v python3 >/dev/null 2>&1 || { log "missing python3 to read $DASHBOARD"; return 1; }
  python3 - "$DASHBOARD" <<'PY'
import json, sys
path = sys.argv[1]
with open(path) as f:
    dash = json.load(f)
problems = []
for key in ("title", "uid", "schemaVersion", "panels", "templating"):
    if key not in dash:
        problems.append(f"no {key}")
names = [v.get("name") for v in dash.get("templating", {}).get("list", [])]
if "datasource" not in names:
    problems.append("no datasource variable")
exprs = 0
for panel in dash.get("panels", []):
    if "type" not in panel:
        problems.append(f"panel {panel.get('title')!r} has no type")
    if panel.get("type") == "row":
        continue
    if panel.get("datasource", {}).get("uid") != "${datasource}":
        problems.append(f"panel {panel.get('title')!r} does not use ${{datasource}}")
    targets = panel.get("targets") or []
    if not targets:
        problems.append(f"panel {panel.get('title')!r} has no targets")
    for target in targets:
        if not target.get("expr"):
            problems.append(f"panel {panel.get('title')!r} has a target without expr")
        exprs += 1
if problems:
    sys.exit(f"check-ops: {path}: " + "; ".join(problems))
print(f"check-ops: {path}: {len(dash['panels'])} panels, {exprs} queries", file=sys.stderr)
PY
}

install_promtool
promtool check rules "$RULES"
promtool test rules "$RULE_TESTS"
check_dashboard
