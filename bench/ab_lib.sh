# What the A/B scripts against redis-server share (sourced, not run):
# starting a tembo build or redis-server (AOF fsynced always) on $PORT
# with its data in $DIR, a pipelined redis-benchmark that prints
# requests/s, stopping the server, and the medians of the rounds.
# The caller sets PORT and DIR; each result line it appends to its
# output file reads "round R SERVER TEST REQUESTS/S ...".

# ab_start BIN|redis: starts it on a fresh $DIR; sets `name` and `SP`.
ab_start() {
  rm -rf "$DIR" && mkdir -p "$DIR"
  if [ "$1" = redis ]; then
    redis-server --port "$PORT" --bind 127.0.0.1 --dir "$DIR" --appendonly yes --appendfsync always --save '' >"$DIR/log" 2>&1 &
    name=redis-aof
  else
    "$1" serve --port "$PORT" --pool "$DIR/p.pool" --pool-size 1G --pool-max-size 8G --loglevel warning >"$DIR/log" 2>&1 &
    name=$(basename "$1")
  fi
  SP=$!
  for _ in $(seq 100); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
}

# ab_stop: shuts the server down and waits for it.
ab_stop() {
  redis-cli -p "$PORT" shutdown nosave >/dev/null 2>&1 || true
  wait "$SP" || true
}

# bench ARGS...: redis-benchmark -c 50 -P 16 on $PORT; prints requests/s.
bench() {
  redis-benchmark -p "$PORT" -c 50 -P 16 -q "$@" 2>&1 | tr '\r' '\n' | grep "per second" |
    sed 's/.*: \([0-9.]*\) requests per second.*/\1/' | tail -1
}

# ab_medians FILE ROUNDS: the median requests/s of each server and test.
ab_medians() {
  echo "medians of $2 rounds (requests/s):"
  awk '{print $3, $4}' "$1" | sort -u | while read -r name t; do
    med=$(awk -v n="$name" -v t="$t" '$3 == n && $4 == t {print $5}' "$1" | sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}')
    printf '%-14s %-20s %s\n' "$name" "$t" "$med"
  done
}
