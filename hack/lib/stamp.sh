# hack/lib/stamp.sh: what the build scripts of tools pinned in a Go module (hack/build-control-
# plane.sh, build-e2e.sh, build-helm.sh) share: the --check/--force flags, a stamp of the module's
# go.mod and go.sum and the build recipe next to the binaries, and a lock that serializes
# concurrent callers (make and a test binary may both ask for a build). Source it after cd to the
# repository.

# stamp_mode ARGS...: prints build, check or force for the script's arguments.
stamp_mode() {
  case "${1:-}" in
    "") echo build ;;
    --check) echo check ;;
    --force) echo force ;;
    *) echo "usage: $0 [--check|--force]" >&2; return 2 ;;
  esac
}

# stamp_want TOOLS RECIPE: the stamp the binaries built from module TOOLS by RECIPE carry.
stamp_want() {
  { cat "$1/go.mod" "$1/go.sum"; echo "$2"; } | sha256sum | cut -d' ' -f1
}

# stamp_up_to_date STAMP TOOLS RECIPE BINARY...: the stamp matches and every binary is there.
stamp_up_to_date() {
  local stamp=$1 tools=$2 recipe=$3 b
  shift 3
  [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$(stamp_want "$tools" "$recipe")" ] || return 1
  for b in "$@"; do
    [ -x "$b" ] || return 1
  done
}

# stamp_targets_up_to_date STAMP TOOLS RECIPE BIN TARGET...: stamp_up_to_date for targets
# "name:..." built into the directory BIN.
stamp_targets_up_to_date() {
  local stamp=$1 tools=$2 recipe=$3 bin=$4 t bins=()
  shift 4
  for t in "$@"; do
    bins+=("$bin/${t%%:*}")
  done
  stamp_up_to_date "$stamp" "$tools" "$recipe" "${bins[@]}"
}

# stamp_lock LOCK MESSAGE: holds LOCK (on fd 9) for the rest of the script, printing MESSAGE
# when another build holds it and this one waits.
stamp_lock() {
  exec 9>"$1"
  if ! flock -n 9; then
    echo "$2"
    flock 9
  fi
}
