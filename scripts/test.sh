#!/usr/bin/env bash
# Runs every check: lint, types, import contracts, the test suite on SQLite and on PostgreSQL.
# Every step runs whatever an earlier one found, so one run shows everything that is wrong; the
# summary at the end lists each step's result and the exit status is non-zero if any failed.
# PostgreSQL is required when CI is set; elsewhere it is skipped with a warning if unreachable.
# A database named in TEST_POSTGRES_URL that the server does not have is created first.
# Arguments are passed to both pytest runs (`make test` passes none; `bash scripts/test.sh -x`).
# The SQLite half runs every test; the PostgreSQL half only the modules that depend on the engine
# (tests/postgresql_half.py), or every test with PG_FULL=1. Each half prints its 20 slowest tests;
# the summary ends with the run's total wall time.
set -uo pipefail
STARTED=$SECONDS
cd "$(dirname "$0")/.."
BIN=.venv/bin
PG_URL="${TEST_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/test}"
# One pytest worker per core (pytest-xdist); each worker gets its own test database. Tests of one
# xdist_group run on one worker (--dist loadgroup): the deployment tests/scaleout starts once.
WORKERS="${PYTEST_WORKERS:-auto}"
LOGS="$(mktemp -d)"
trap 'rm -rf "$LOGS"' EXIT

SUMMARY=()
FAILED=0

# record NAME STATUS [DETAIL]: one line of the summary; a non-zero STATUS fails the run.
record() {
  local name=$1 status=$2 detail=${3:-}
  if [ "$status" -eq 0 ]; then
    SUMMARY+=("$(printf '  %-26s ok%s' "$name" "${detail:+  ($detail)}")")
  else
    SUMMARY+=("$(printf '  %-26s FAILED%s' "$name" "${detail:+  ($detail)}")")
    FAILED=1
  fi
}

step() {
  local name=$1
  shift
  echo "== $name"
  "$@"
  local status=$?
  record "$name" "$status" "$([ "$status" -eq 0 ] || echo "exit $status")"
}

# pytest_half NAME [ENV=VALUE...]: the suite once, in the environment given (the PostgreSQL
# half collects only the modules that depend on the engine), printing the 20 slowest tests. Exit status 5 (nothing collected) and a run in which every test was skipped
# count as failures: a run that checked nothing must not pass.
pytest_half() {
  local name=$1 log="$LOGS/$1.log" began=$SECONDS color=()
  shift
  [ -t 1 ] && color=(--color=yes)
  echo "== pytest ($name)"
  env "$@" "$BIN/pytest" -q -p no:cacheprovider -n "$WORKERS" --dist loadgroup --durations=20 \
    "${color[@]}" \
    "${PYTEST_ARGS[@]}" 2>&1 | tee "$log"
  local status=${PIPESTATUS[0]}
  local result
  result="$(sed 's/\x1b\[[0-9;]*m//g' "$log" | grep -E '^=*[ ]*(no tests ran|[0-9]+ [a-z]+.* in [0-9.]+s)' \
    | tail -n 1 | sed -E 's/^=+ //; s/ =+$//')"
  local detail="${result:-no summary line} after $((SECONDS - began)) s"
  if [ "$status" -eq 0 ] && ! grep -Eq '[0-9]+ passed' <<<"$result"; then
    detail="no test ran: $detail"
    status=1
  elif [ "$status" -eq 5 ]; then
    detail="no test collected: $detail"
  fi
  record "pytest ($name)" "$status" "$detail"
}

# pg_ready: 0 when the database of PG_URL answers (made first if the server has no such database),
# 1 when the server does not answer, 2 when the database is missing and cannot be made; the line
# saying which is left in PG_STATE (scripts/pg_ready.py).
PG_STATE=""
pg_ready() {
  PG_STATE="$("$BIN/python" scripts/pg_ready.py "$PG_URL" 2>&1)"
  local status=$?
  echo "$PG_STATE"
  return $status
}

PYTEST_ARGS=("$@")

step "ruff check" "$BIN/ruff" check --no-cache .
step "ruff format" "$BIN/ruff" format --no-cache --check .
step "mypy" "$BIN/mypy" .
step "import contracts" "$BIN/lint-imports" --no-cache

echo "== browser"
if bash scripts/ensure_browser.sh; then
  record "browser" 0 "chromium"
elif [ -n "${CI:-}" ]; then
  record "browser" 1 "chromium is required in CI"
else
  SUMMARY+=("$(printf '  %-26s skipped  (%s)' "browser" "no chromium: browser tests skip")")
fi

# The independent OpenID Connect provider of the sign-on browser tests (npm's oidc-provider).
echo "== oidc provider"
if bash scripts/ensure_oidc_provider.sh; then
  record "oidc provider" 0 "oidc-provider"
elif [ -n "${CI:-}" ]; then
  record "oidc provider" 1 "the OpenID provider is required in CI"
else
  SUMMARY+=("$(printf '  %-26s skipped  (%s)' "oidc provider" "no node/npm: the sign-on tests skip")")
fi

# HAProxy for the scale-out test (tests/scaleout), which runs in the PostgreSQL half.
echo "== haproxy"
if bash scripts/ensure_haproxy.sh; then
  record "haproxy" 0 "haproxy"
elif [ -n "${CI:-}" ]; then
  record "haproxy" 1 "haproxy is required in CI"
else
  SUMMARY+=("$(printf '  %-26s skipped  (%s)' "haproxy" "no haproxy: the scale-out test skips")")
fi

pytest_half SQLite -u DATABASE_URL

pg_ready >/dev/null
PG_STATUS=$?
if [ "$PG_STATUS" -eq 1 ] && command -v pg_ctlcluster >/dev/null 2>&1; then
  echo "== starting PostgreSQL"
  # pg_ctl waits until the server accepts connections before it returns.
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start || true
fi
echo "== PostgreSQL"
pg_ready
PG_STATUS=$?
if [ "$PG_STATUS" -eq 0 ]; then
  pytest_half PostgreSQL DATABASE_URL="$PG_URL"
elif [ -n "${CI:-}" ]; then
  record "pytest (PostgreSQL)" 1 "PostgreSQL is required in CI: $PG_STATE"
else
  echo "WARNING: $PG_STATE; the PostgreSQL half of the suite was skipped" >&2
  SUMMARY+=("$(printf '  %-26s skipped  (%s)' "pytest (PostgreSQL)" "$PG_STATE")")
fi

echo
echo "== summary"
printf '%s\n' "${SUMMARY[@]}"
ELAPSED=$((SECONDS - STARTED))
printf '  %-26s %d min %02d s\n' "total wall time" $((ELAPSED / 60)) $((ELAPSED % 60))
if [ "$FAILED" -ne 0 ]; then
  echo "make test: FAILED"
  exit 1
fi
echo "make test: every check passed"
