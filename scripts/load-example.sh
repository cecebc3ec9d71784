#!/usr/bin/env bash
# Measures examples/standard from outside, as a sender sees it: the example runs as
# its own process(es) (release build, INFO logging to a file) and
# hookbox-bench-load sends 1 KiB Standard Webhooks deliveries over 64 keep-alive
# connections, 10 s per row.
#
#   scripts/load-example.sh sqlite     # a fresh SQLite file in a temp dir
#   scripts/load-example.sh postgres   # a fresh schema on HOOKBOX_PG_URL, dropped at the end
#
# Rows: the receiver alone (`serve --no-worker`) with fresh deliveries and with
# duplicates; the receiver with its worker in one process (`serve`) at an offered
# 1,500/s and as fast as answered; the receiver and a `worker` process on one store
# at an offered 1,500/s. The rows share one store, so the worker starts with the
# backlog of the rows before it and is busy throughout: the edge's worst case.
# LOAD_SECONDS and LOAD_CONNS change the length and the connections.
set -euo pipefail
export PGOPTIONS="${PGOPTIONS:---client-min-messages=warning}"
cd "$(dirname "$0")/.."

store="${1:-sqlite}"
seconds="${LOAD_SECONDS:-10}"
conns="${LOAD_CONNS:-64}"
port="${LOAD_PORT:-3917}"
url="http://127.0.0.1:$port/webhooks/standard"
work="$(mktemp -d)"
pids=()

features=()
case "$store" in
  sqlite) export HOOKBOX_STORE="$work/hookbox.db" ;;
  postgres)
    features=(--features postgres)
    pg_url="${HOOKBOX_PG_URL:-postgres://postgres@127.0.0.1:5432/test}"
    schema="hookbox_load_$$"
    psql -q "$pg_url" -c "CREATE SCHEMA $schema"
    export HOOKBOX_STORE="$pg_url?options=-csearch_path%3D$schema"
    ;;
  *) echo "usage: $0 sqlite|postgres" >&2; exit 2 ;;
esac

stop_all() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  pids=()
}
cleanup() {
  stop_all
  if [ "$store" = postgres ]; then psql -q "$pg_url" -c "DROP SCHEMA $schema CASCADE" || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

cargo build -q --release -p example-standard "${features[@]}"
cp target/release/example-standard "$work/example-standard"
cargo build -q --release -p hookbox-bench --bin hookbox-bench-load
load=target/release/hookbox-bench-load

# starts the example with `$@`, waits for its first line
start() {
  PORT=$port "$work/example-standard" "$@" >"$work/out.log" 2>>"$work/example.log" &
  pids+=($!)
  for _ in $(seq 100); do
    grep -q listening "$work/out.log" 2>/dev/null && return 0
    sleep 0.1
  done
  echo "the example did not start; its log:" >&2
  tail -20 "$work/example.log" >&2
  exit 1
}
worker() {
  "$work/example-standard" worker >/dev/null 2>>"$work/example.log" &
  pids+=($!)
}
row() {
  printf '%-34s ' "$1"
  shift
  "$load" --url "$url" --conns "$conns" --seconds "$seconds" "$@"
}

echo "examples/standard on $store, $conns connections, $seconds s per row, $(nproc) cores"
start serve --no-worker
row "serve --no-worker"
row "serve --no-worker" --duplicates
stop_all
start serve
row "serve (worker in the process)" --rate 1500
row "serve (worker in the process)"
stop_all
start serve --no-worker
worker
row "serve --no-worker + worker" --rate 1500
stop_all
