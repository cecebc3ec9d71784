#!/usr/bin/env bash
# What this machine's Postgres allows a batched worker at best, measured with pgbench
# and no hookbox code: 2 clients each committing transactions of 20 one-row inserts,
# with a savepoint around each insert (as the worker runs each handler) and without.
# rows/s = tps x 20. The worker's rows/s in docs/performance.md are read against it.
#
#   scripts/pg-savepoint-ceiling.sh        # HOOKBOX_PG_URL, default the local server
set -euo pipefail
export PGOPTIONS="${PGOPTIONS:---client-min-messages=warning}"
url="${HOOKBOX_PG_URL:-postgres://postgres@127.0.0.1:5432/test}"
seconds="${CEILING_SECONDS:-10}"
work="$(mktemp -d)"
table="hookbox_ceiling_$$"
trap 'psql -q "$url" -c "DROP TABLE IF EXISTS $table" || true; rm -rf "$work"' EXIT
psql -q "$url" -c "CREATE TABLE $table (delivery_id text NOT NULL, applied_at bigint NOT NULL)"
{
  echo "BEGIN;"
  for _ in $(seq 20); do
    echo "SAVEPOINT row;"
    echo "INSERT INTO $table VALUES ('evt', 1);"
    echo "RELEASE SAVEPOINT row;"
  done
  echo "COMMIT;"
} >"$work/savepoints.sql"
{
  echo "BEGIN;"
  for _ in $(seq 20); do echo "INSERT INTO $table VALUES ('evt', 1);"; done
  echo "COMMIT;"
} >"$work/plain.sql"
echo "pgbench, 2 clients, $seconds s, transactions of 20 inserts, $(nproc) cores"
for script in savepoints plain; do
  tps=$(pgbench "$url" -n -c 2 -j 2 -T "$seconds" -M prepared -f "$work/$script.sql" 2>/dev/null \
    | sed -n 's/^tps = \([0-9.]*\).*/\1/p')
  printf '%-12s %8.0f tx/s %8.0f rows/s\n' "$script" "$tps" "$(echo "$tps * 20" | bc -l)"
done
