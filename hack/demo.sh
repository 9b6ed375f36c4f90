#!/usr/bin/env bash
# hack/demo.sh runs the antrea-proxy demo on the e2e sandbox cluster (test/e2e/demo): a real
# control plane, two nodes as network namespaces with their own Open vSwitch and the real
# antrea-agent, the real antrea-controller handing out LoadBalancer addresses from a VIP pool and
# a Proxy pool, echo pods, LoadBalancer Services in both ipModes (one of them Degraded), an
# external client and an external L4 load balancer at the provider's Proxy addresses. It prints
# the KEP-4631 conditions, who answered each connection and from which source (a wrong answer
# fails the demo), and `antctl get servicemap`.
#   up    build what is missing (the control plane takes about 15 minutes the first time), start
#         the sandbox in the background and print the demo; the sandbox keeps running
#   down  stop the sandbox and remove everything it created
#   lab   the older one-node demo (test/demo): in-process proxier, no control plane
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH
STATE=_output/demo
PIDFILE=$STATE/demo.pid
LOG=$STATE/demo.log
NSFILE=$STATE/namespaces

running() { [ -f "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; }

# show prints the demo's own lines from its log (not the test runner's or the components').
show() { grep -v -E '^(=== RUN|--- PASS|PASS$|ok |\s+[a-z_]+\.go:[0-9]+:|\s+[IEW][0-9]{4} )' "$1" || true; }

up() {
  if running; then
    echo "demo: already running (pid $(cat "$PIDFILE")); \`make demo-down\` stops it"
    show "$LOG"
    exit 0
  fi
  mkdir -p "$STATE"
  bash hack/build-control-plane.sh
  echo "demo: building the demo..."
  go test -c -tags demo -o "$STATE/demo.test" ./test/e2e/demo
  rm -f "$NSFILE"
  : >"$LOG"
  # Its own session, so that it outlives this shell; it stops on SIGUSR1 (make demo-down).
  DEMO_WAIT=1 DEMO_STATE_FILE="$NSFILE" setsid "$STATE/demo.test" -test.run '^TestDemo$' -test.v -test.timeout 0 \
    >"$LOG" 2>&1 </dev/null &
  echo $! >"$PIDFILE"
  echo "demo: starting (pid $(cat "$PIDFILE"), log $LOG)..."
  while running && ! grep -q '^== demo is up' "$LOG"; do sleep 0.5; done
  show "$LOG"
  if ! running; then
    rm -f "$PIDFILE"
    echo "demo: FAILED; the full log is $LOG" >&2
    exit 1
  fi
}

down() {
  if running; then
    pid=$(cat "$PIDFILE")
    kill -USR1 "$pid"
    for _ in $(seq 120); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    # Not stopped gracefully: SIGTERM makes the sandbox remove its namespaces and exit.
    if kill -0 "$pid" 2>/dev/null; then kill -TERM "$pid" 2>/dev/null || true; sleep 5; fi
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null || true
  fi
  # Whatever a killed demo left behind: its namespaces and every process in them.
  if [ -f "$NSFILE" ]; then
    prefix=$(cat "$NSFILE")
    for ns in $(ip netns list | awk '{print $1}' | grep -E "^${prefix}" || true); do
      for p in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$p" 2>/dev/null || true; done
      ip netns delete "$ns" 2>/dev/null || true
    done
  fi
  rm -f "$PIDFILE" "$NSFILE"
  echo "demo: stopped and cleaned up"
}

case "${1:-up}" in
  up) up ;;
  down) down ;;
  lab)
    echo "demo (lab): building and starting (about a minute the first time)..."
    go test -tags demo -count=1 -run '^TestDemo$' ./test/demo/ -v 2>&1 \
      | grep -v -E '^(=== RUN|--- PASS|PASS|ok |I[0-9]{4} |E[0-9]{4} |W[0-9]{4} )' ;;
  *) echo "usage: $0 up|down|lab" >&2; exit 2 ;;
esac
