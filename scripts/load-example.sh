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
#
#   scripts/load-example.sh sqlite sustained     # or postgres
#
# The sustained set instead: `serve` (one process) and `serve --no-worker` + `worker`
# (two), each on a fresh store, offered 1,000, 2,000, 5,000 and 10,000 deliveries/s
# for SUSTAINED_SECONDS (30) each. Per row: the acknowledged rate and ack p99 (from
# the sender), the rows the worker processed per second during the load, the
# backlog (pending rows) when the load stops, and how long the worker then takes to
# drain it (read from the store with sqlite3 or psql every 0.5 s; at most
# DRAIN_LIMIT, 300 s). SUSTAINED_RATES changes the rates.
set -euo pipefail
export PGOPTIONS="${PGOPTIONS:---client-min-messages=warning}"
cd "$(dirname "$0")/.."

store="${1:-sqlite}"
set_name="${2:-edge}"
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

# pending and processed rows, from the store itself: "pending processed"
counts() {
  local sql="SELECT COUNT(*) FILTER (WHERE processed_at IS NULL AND dead_at IS NULL), COUNT(*) FILTER (WHERE processed_at IS NOT NULL) FROM hookbox_inbox"
  if [ "$store" = postgres ]; then
    psql -qAt -F ' ' "$pg_url" -c "SET search_path = $schema; $sql" | tail -1
  else
    sqlite3 -separator ' ' "$HOOKBOX_STORE" "$sql"
  fi
}
# a fresh, empty store for the next sustained row
fresh_store() {
  if [ "$store" = postgres ]; then
    psql -q "$pg_url" -c "DROP SCHEMA $schema CASCADE; CREATE SCHEMA $schema"
  else
    rm -f "$work"/hookbox.db*
  fi
}
# one sustained row: `$1` the label, `$2` the offered rate; the example is running
sustained_row() {
  local label="$1" rate="$2" out started load_s pending processed drained=""
  started=$(date +%s.%N)
  out=$("$load" --url "$url" --conns "$conns" --seconds "$sustained_seconds" --rate "$rate" || true)
  load_s=$(echo "$(date +%s.%N) - $started" | bc -l)
  read -r pending processed < <(counts)
  local stop_at=$(( $(date +%s) + drain_limit )) drain_started
  drain_started=$(date +%s.%N)
  while :; do
    read -r left _ < <(counts)
    if [ "$left" -eq 0 ]; then
      drained=$(echo "$(date +%s.%N) - $drain_started" | bc -l)
      break
    fi
    [ "$(date +%s)" -ge "$stop_at" ] && break
    sleep 0.5
  done
  local acked p99
  acked=$(echo "$out" | sed -n 's/.*: \([0-9]*\) acked\/s.*/\1/p')
  p99=$(echo "$out" | sed -n 's/.* p99 \([0-9.]*\) ms.*/\1/p')
  local drain_shown=">$drain_limit"
  local drain_json=null
  if [ -n "$drained" ]; then
    drain_shown=$(printf '%.1f' "$drained")
    drain_json=$(printf '%.3f' "$drained")
  fi
  printf '%-30s %9s %9s %9s %14.0f %9s %10s\n' "$label" "$rate" "${acked:-?}" "${p99:-?}" \
    "$(echo "$processed / $load_s" | bc -l)" "$pending" "$drain_shown"
  echo "{\"row\":\"sustained\",\"store\":\"$store\",\"topology\":\"$label\",\"offered_per_s\":$rate,\"acked_per_s\":${acked:-null},\"p99_ms\":${p99:-null},\"processed_per_s\":$(printf '%.0f' "$(echo "$processed / $load_s" | bc -l)"),\"backlog\":$pending,\"drain_s\":$drain_json}" >>"$work/sustained.jsonl"
  if [ -n "$out" ] && ! echo "$out" | grep -q "failed: 0"; then echo "  sender: $out" >&2; fi
}

if [ "$set_name" = sustained ]; then
  sustained_seconds="${SUSTAINED_SECONDS:-30}"
  drain_limit="${DRAIN_LIMIT:-300}"
  read -r -a rates <<<"${SUSTAINED_RATES:-1000 2000 5000 10000}"
  echo "examples/standard on $store, sustained: $conns connections, $sustained_seconds s per row, $(nproc) cores"
  printf '%-30s %9s %9s %9s %14s %9s %10s\n' topology offered/s acked/s "p99 ms" "processed/s" backlog "drain s"
  for topology in one two; do
    for rate in "${rates[@]}"; do
      fresh_store
      if [ "$topology" = one ]; then
        start serve
        label="serve"
      else
        start serve --no-worker
        worker
        label="serve --no-worker + worker"
      fi
      sustained_row "$label" "$rate"
      stop_all
    done
  done
  cat "$work/sustained.jsonl"
  exit 0
fi

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
