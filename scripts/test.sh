#!/usr/bin/env bash
# Runs every check: lint, types, import contracts, the test suite on SQLite, then on PostgreSQL.
# PostgreSQL is required when CI is set; elsewhere it is skipped with a warning if unreachable.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin
PG_URL="${TEST_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/test}"
# One pytest worker per core (pytest-xdist); each worker gets its own test database.
WORKERS="${PYTEST_WORKERS:-auto}"

echo "== ruff"
"$BIN/ruff" check --no-cache .
"$BIN/ruff" format --no-cache --check .
echo "== mypy"
"$BIN/mypy" .
echo "== import contracts"
"$BIN/lint-imports" --no-cache

echo "== browser"
bash scripts/ensure_browser.sh || [ -z "${CI:-}" ]  # outside CI, browser tests skip without it

echo "== pytest (SQLite)"
env -u DATABASE_URL "$BIN/pytest" -q -p no:cacheprovider -n "$WORKERS" "$@"

pg_ready() {
  "$BIN/python" - "$PG_URL" <<'PY'
import sys, psycopg
try:
    psycopg.connect(sys.argv[1], connect_timeout=3).close()
except Exception as exc:  # noqa: BLE001
    print(f"PostgreSQL not reachable: {exc}", file=sys.stderr)
    sys.exit(1)
PY
}

if ! pg_ready && command -v pg_ctlcluster >/dev/null 2>&1; then
  echo "== starting PostgreSQL"
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start || true
  sleep 2
fi
if pg_ready; then
  echo "== pytest (PostgreSQL)"
  DATABASE_URL="$PG_URL" "$BIN/pytest" -q -p no:cacheprovider -n "$WORKERS" "$@"
elif [ -n "${CI:-}" ]; then
  echo "PostgreSQL is required in CI" >&2
  exit 1
else
  echo "WARNING: PostgreSQL unreachable at $PG_URL; its half of the suite was skipped" >&2
fi
