#!/usr/bin/env bash
# Checks the Prometheus rules, their unit tests and the Grafana dashboard that the chart ships:
#
#   1. promtool check rules charts/lightsout/files/alerts.yaml
#   2. promtool test rules tests/alerts/*.test.yaml (every alert fires and stays silent)
#   3. charts/lightsout/files/dashboard.json: valid JSON, uid lightsout-overview, unique panel
#      ids, only the ${datasource} variable as data source, no external URLs, every template
#      variable it uses is defined, and every PromQL expression parses (written, with Grafana's
#      variables substituted, as recording rules into a temporary file for promtool check rules)
#   4. every lightsout_* metric name used by the rules, their tests and the dashboard is one of
#      the families below (documented in controller/src/metrics.rs), and every lightsout:*
#      recording rule they use is recorded in alerts.yaml.
#
# Needs promtool (Debian: apt-get install prometheus) and python3. Run from the repository root
# (it changes to the root itself when run from elsewhere). Exits non-zero on the first failure.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

RULES=charts/lightsout/files/alerts.yaml
DASHBOARD=charts/lightsout/files/dashboard.json
TESTS_DIR=tests/alerts
METRICS_RS=controller/src/metrics.rs

# The controller's metric families (controller/src/metrics.rs). Keep in sync with it: the check
# below fails when a name here is no longer in metrics.rs.
ALLOWED_METRICS=(
  lightsout_trials_total
  lightsout_trial_attempt_infra_failures_total
  lightsout_tokens_total
  lightsout_cost_usd_total
  lightsout_unpriced_calls_total
  lightsout_run_budget_usd
  lightsout_run_spend_usd
  lightsout_active_trials
  lightsout_pending_trials
  lightsout_trials_queued
  lightsout_trials_preempted
  lightsout_judge_calls_total
  lightsout_judge_failures_total
  lightsout_provider_rate_limited_total
  lightsout_provider_retries_total
  lightsout_run_complete
  lightsout_run_last_progress_timestamp_seconds
  lightsout_variant_recall
  lightsout_variant_composite_score
  lightsout_reconciles_total
  lightsout_reconcile_errors_total
  lightsout_leader
  lightsout_schedule_regressed
  lightsout_schedule_comparisons_total
)
# Histograms: usable only with the _bucket, _count and _sum suffixes.
HISTOGRAM_METRICS=(
  lightsout_trial_duration_seconds
  lightsout_reconcile_duration_seconds
)

fail() {
  echo "check-alerts: FAIL: $*" >&2
  exit 1
}

command -v promtool >/dev/null 2>&1 || fail "promtool not found (Debian: apt-get install prometheus)"
command -v python3 >/dev/null 2>&1 || fail "python3 not found"
for f in "$RULES" "$DASHBOARD" "$METRICS_RS"; do
  [[ -f "$f" ]] || fail "$f does not exist"
done

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

echo "== promtool check rules $RULES"
promtool check rules "$RULES" || fail "promtool check rules $RULES"

shopt -s nullglob
tests=("$TESTS_DIR"/*.test.yaml)
shopt -u nullglob
((${#tests[@]} > 0)) || fail "no rule tests in $TESTS_DIR/*.test.yaml"
echo "== promtool test rules ${tests[*]}"
promtool test rules "${tests[@]}" || fail "promtool test rules: a unit test failed (see above)"

echo "== dashboard $DASHBOARD"
python3 - "$DASHBOARD" "$tmp/dashboard-exprs.yaml" >"$tmp/dashboard-summary" <<'PY' || fail "dashboard $DASHBOARD is invalid (see above)"
import json
import re
import sys

path, out = sys.argv[1], sys.argv[2]
errors = []
try:
    with open(path, encoding="utf-8") as f:
        text = f.read()
    dashboard = json.loads(text)
except (OSError, ValueError) as e:
    sys.exit(f"{path}: not valid JSON: {e}")

if dashboard.get("uid") != "lightsout-overview":
    errors.append(f'uid is {dashboard.get("uid")!r}, not "lightsout-overview"')
if re.search(r"https?://", text):
    errors.append("contains an URL: the dashboard must not need external assets or links")

variables = {v.get("name"): v for v in dashboard.get("templating", {}).get("list", [])}
for name in ("datasource", "namespace", "run"):
    if name not in variables:
        errors.append(f"template variable {name!r} is missing")
if variables.get("datasource", {}).get("type") != "datasource" or \
        variables.get("datasource", {}).get("query") != "prometheus":
    errors.append("template variable 'datasource' must be of type datasource, query prometheus")

# Grafana's built-in variables, replaced by values valid where they are used.
BUILTINS = {
    "__rate_interval": "5m", "__interval": "1m", "__range": "1h", "__interval_ms": "60000",
    "__range_s": "3600", "__range_ms": "3600000",
}
VAR = re.compile(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)|\[\[(\w+)\]\]")


def substitute(expr, where):
    def repl(m):
        name = m.group(1) or m.group(2) or m.group(3)
        if name in BUILTINS:
            return BUILTINS[name]
        if name not in variables:
            errors.append(f"{where}: uses undefined variable ${name}")
        return "x"
    return VAR.sub(repl, expr)


def all_panels(panels):
    for p in panels:
        yield p
        yield from all_panels(p.get("panels", []))


exprs = []  # (where, expr with variables substituted)
ids = {}
panels = list(all_panels(dashboard.get("panels", [])))
if not panels:
    errors.append("no panels")
for p in panels:
    title = p.get("title", "?")
    pid = p.get("id")
    if not isinstance(pid, int):
        errors.append(f"panel {title!r} has no integer id")
    elif pid in ids:
        errors.append(f"panel id {pid} is used by {ids[pid]!r} and {title!r}")
    else:
        ids[pid] = title
    if p.get("type") == "row":
        continue
    targets = p.get("targets", [])
    if not targets:
        errors.append(f"panel {title!r} has no queries")
    for t in targets:
        where = f"panel {pid} {title!r} ref {t.get('refId', '?')}"
        ds = t.get("datasource", p.get("datasource", {}))
        if not isinstance(ds, dict) or ds.get("uid") != "${datasource}":
            errors.append(f"{where}: data source must be ${{datasource}}, not {ds!r}")
        expr = t.get("expr", "")
        if not expr.strip():
            errors.append(f"{where}: empty expr")
            continue
        exprs.append((where, substitute(expr, where)))

# Query variables: label_values(SELECTOR, label) -> SELECTOR must parse.
for name, v in variables.items():
    if v.get("type") != "query":
        continue
    query = v.get("query")
    if isinstance(query, dict):
        query = query.get("query", "")
    m = re.fullmatch(r"\s*label_values\((.*),\s*(\w+)\s*\)\s*", query or "")
    if m:
        exprs.append((f"variable {name}", substitute(m.group(1), f"variable {name}")))
    elif (query or "").strip().startswith(("label_values(", "label_names(", "metrics(")):
        pass  # label_values(label) and friends take no PromQL
    else:
        exprs.append((f"variable {name}", substitute(query or "", f"variable {name}")))

if errors:
    for e in errors:
        print(f"{path}: {e}", file=sys.stderr)
    sys.exit(1)

# Recording rules, one per expression; JSON strings are valid YAML double-quoted scalars.
with open(out, "w", encoding="utf-8") as f:
    f.write("groups:\n  - name: dashboard-expressions\n    rules:\n")
    for i, (where, expr) in enumerate(exprs):
        f.write(f"      # {where}\n")
        f.write(f"      - record: dashboard_expr_{i}\n        expr: {json.dumps(expr)}\n")
with open(out + ".exprs", "w", encoding="utf-8") as f:
    for where, expr in exprs:
        f.write(f"{where}\t{expr}\n")
print(f"{len(panels)} panels, {len(exprs)} expressions")
PY
echo "$(cat "$tmp/dashboard-summary") (JSON valid, panel ids unique)"
promtool check rules "$tmp/dashboard-exprs.yaml" >"$tmp/promtool-dashboard.log" 2>&1 || {
  cat "$tmp/promtool-dashboard.log" >&2
  echo "--- the expressions (variables substituted):" >&2
  cat -n "$tmp/dashboard-exprs.yaml" >&2
  fail "a PromQL expression of the dashboard does not parse (see above)"
}
echo "every dashboard expression parses"

echo "== metric names"
ALLOWED="${ALLOWED_METRICS[*]}" HISTOGRAMS="${HISTOGRAM_METRICS[*]}" \
  python3 - "$METRICS_RS" "$RULES" "$tmp/dashboard-exprs.yaml.exprs" "${tests[@]}" <<'PY' || fail "unknown metric names (see above)"
import os
import re
import sys

metrics_rs, rules, *files = sys.argv[1:]
allowed = set(os.environ["ALLOWED"].split())
histograms = set(os.environ["HISTOGRAMS"].split())
errors = []

with open(metrics_rs, encoding="utf-8") as f:
    source = f.read()
for name in sorted(allowed | histograms):
    if not re.search(rf"\b{name}\b", source):
        errors.append(f"{name} is in this script's list but not in {metrics_rs} (renamed or removed?)")

names = set(allowed)
for h in histograms:
    names |= {h + "_bucket", h + "_count", h + "_sum"}

def lines(path):
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.lstrip().startswith("#"):  # comments may talk about anything
                yield n, line

recorded = set()
for _, line in lines(rules):
    m = re.match(r"\s*-?\s*record:\s*(\S+)", line)
    if m:
        recorded.add(m.group(1))

used = 0
for path in [rules, *files]:
    dashboard = path.endswith(".exprs")  # lines "WHERE<TAB>EXPR" of the dashboard's expressions
    for n, line in lines(path):
        shown = f"dashboard {line.split(chr(9))[0]}" if dashboard else f"{path}:{n}"
        for name in re.findall(r"\blightsout[_:][A-Za-z0-9_:]+", line):
            used += 1
            if ":" in name:
                if name not in recorded:
                    errors.append(f"{shown}: {name} is not a recording rule of {rules}")
            elif name not in names:
                hint = " (a histogram: use _bucket, _count or _sum)" if name in histograms else ""
                errors.append(f"{shown}: unknown metric {name}{hint}")

if errors:
    for e in errors:
        print(e, file=sys.stderr)
    sys.exit(1)
print(f"{used} uses of {len(names)} allowed metric names and {len(recorded)} recording rules: all known")
PY

echo "check-alerts: OK"
