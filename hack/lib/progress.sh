# hack/lib/progress.sh: helpers for long builds, sourced by hack/build-e2e.sh and hack/build-coredns.sh.
#
# run_with_progress PREFIX LABEL CMD...: runs CMD in its own process group, printing
# "PREFIX: still LABEL, Ns so far" every 60 s while it is silent, and returns its exit code.
# A caller's EXIT trap should call stop_progress_job, so an interrupted build also stops the
# compilers CMD started.

PROGRESS_PID=

fmt_duration() {
  local s=$1
  if [ "$s" -ge 60 ]; then printf '%dm%02ds' $((s / 60)) $((s % 60)); else printf '%ds' "$s"; fi
}

run_with_progress() {
  local prefix=$1 label=$2 start next rc=0
  shift 2
  start=$(date +%s)
  next=60
  setsid "$@" &
  PROGRESS_PID=$!
  while kill -0 "$PROGRESS_PID" 2>/dev/null; do
    sleep 1
    if [ $(($(date +%s) - start)) -ge "$next" ] && kill -0 "$PROGRESS_PID" 2>/dev/null; then
      echo "$prefix:   still $label, $(fmt_duration "$next") so far"
      next=$((next + 60))
    fi
  done
  wait "$PROGRESS_PID" || rc=$?
  PROGRESS_PID=
  return "$rc"
}

stop_progress_job() {
  [ -n "$PROGRESS_PID" ] || return 0
  kill -TERM -- "-$PROGRESS_PID" 2>/dev/null || true
  wait "$PROGRESS_PID" 2>/dev/null || true
  kill -KILL -- "-$PROGRESS_PID" 2>/dev/null || true
  PROGRESS_PID=
}
