#!/usr/bin/env bash
# hack/images.sh builds every container image of the project with podman, without a registry:
#
#   localhost/antrea-proxy/debian-base:bookworm   debootstrap'ed Debian bookworm (minbase), podman import;
#                                                  mirror and proxy from this machine's apt configuration
#   localhost/antrea-proxy/golang:<go version>     that base plus this machine's Go toolchain
#   localhost/antrea-proxy/antrea-agent:<tag>      build/images/agent/Dockerfile on those two
#   localhost/antrea-proxy/antrea-controller:<tag> build/images/controller/Dockerfile, final stage FROM scratch
#   localhost/antrea-proxy/pause:<tag>             build/images/pause: test/cluster/pause, the sandbox image
#   localhost/antrea-proxy/echoserver:<tag>        build/images/echoserver: test/e2e/echoserver, FROM scratch
#   localhost/antrea-proxy/coredns, agnhost         the cluster DNS and the upstream e2e image
#                                                  (hack/images-upstream.sh; agnhost with IMAGES_E2E=1)
#
# and saves each one as a docker-archive tarball under _output/images/ (<name>.tar), which
# `ctr -n k8s.io images import` loads into containerd. Every step is keyed by a hash of its inputs
# (_output/images/<name>.key): a step whose inputs did not change is skipped. The Dockerfiles take
# GO_IMAGE and BASE_IMAGE build arguments, so `docker build` with their public defaults still works
# elsewhere (see build/images/README.md).
#
# Usage: hack/images.sh [--list]   (--list prints the image references and tarballs, builds nothing)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH

OUT=${IMAGES_DIR:-_output/images}
REPO=localhost/antrea-proxy
TAG=${IMAGE_TAG:-$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}/\1/p' build/charts/antrea-proxy/Chart.yaml)}
VERSION=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}
# RUN steps in a chroot rather than an OCI runtime container: crun refuses machines with a hybrid
# cgroup v1/v2 layout ("cgroups in hybrid mode not supported"), and a build needs no cgroup.
export BUILDAH_ISOLATION=${BUILDAH_ISOLATION:-chroot}
SUITE=bookworm
# shellcheck source=hack/lib/apt-sources.sh
. hack/lib/apt-sources.sh
GO_VERSION=$(go env GOVERSION)
BASE_REF=$REPO/debian-base:$SUITE
GO_REF=$REPO/golang:${GO_VERSION#go}
# shellcheck source=hack/images-upstream.sh
. hack/images-upstream.sh

if [ "${1:-}" = --list ]; then
  for n in antrea-agent antrea-controller pause echoserver; do echo "$REPO/$n:$TAG $OUT/$n.tar"; done
  upstream_image_list
  exit 0
fi

log() { echo "images: $*" >&2; }
have() { command -v "$1" >/dev/null 2>&1; }

need=()
have podman || need+=(podman)
have debootstrap || need+=(debootstrap)
if [ "${#need[@]}" -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "images: missing packages (${need[*]}); run as root or install them with apt-get" >&2
    exit 1
  fi
  log "installing Debian packages: ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${need[@]}" >/dev/null
fi
mkdir -p "$OUT"

# hash_inputs prints one sha256 over the given strings and the contents of the given files and
# directories (every regular file below them, in a stable order).
hash_inputs() {
  {
    for x in "$@"; do
      if [ -d "$x" ]; then
        find "$x" -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum
      elif [ -f "$x" ]; then
        sha256sum "$x"
      else
        echo "$x"
      fi
    done
  } | sha256sum | cut -c1-16
}

# up_to_date NAME KEY: the step NAME last ran with KEY, its tarball (if any) exists and podman
# still has the image.
up_to_date() {
  local name=$1 key=$2 ref=$3
  [ -f "$OUT/$name.key" ] && [ "$(cat "$OUT/$name.key")" = "$key" ] && podman image exists "$ref"
}

# timed NAME CMD...: runs CMD, its output in $OUT/NAME.log, printing a progress line every 30 s.
timed() {
  local name=$1 start=$SECONDS pid rc=0
  shift
  "$@" >"$OUT/$name.log" 2>&1 &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    for _ in $(seq 30); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
    kill -0 "$pid" 2>/dev/null && log "$name: still running ($((SECONDS - start)) s; last: $(tail -n1 "$OUT/$name.log" | cut -c1-100))"
  done
  wait "$pid" || rc=$?
  if [ "$rc" -ne 0 ]; then
    echo "images: $name failed (exit $rc); last lines of $OUT/$name.log:" >&2
    tail -n 30 "$OUT/$name.log" >&2
    exit "$rc"
  fi
  log "$name: done in $((SECONDS - start)) s"
}

# 1. The Debian base, debootstrap'ed once from Debian's packages and imported. The mirror and the
# proxy are the machine's own apt configuration (so a corporate mirror or a local cache works);
# DEBIAN_MIRROR and http_proxy override them.
MIRROR=${DEBIAN_MIRROR:-$(apt_debian_mirror "$SUITE" || true)}
if [ -z "$MIRROR" ]; then
  echo "images: no Debian mirror: no enabled 'deb' source with component main for $SUITE (or another" >&2
  echo "images: Debian release on a .../debian URI) in /etc/apt/sources.list or /etc/apt/sources.list.d/" >&2
  echo "images: (*.list, *.sources); configure apt, or set DEBIAN_MIRROR=<url of a Debian mirror>" >&2
  exit 1
fi
if [ -z "${http_proxy:-}" ]; then
  apt_proxy=$(apt_http_proxy)
  if [ -n "$apt_proxy" ]; then
    log "debootstrap goes through apt's proxy (Acquire::http::Proxy)"
    export http_proxy=$apt_proxy
  fi
fi
base_key=$(hash_inputs "$SUITE" "$MIRROR" minbase hack/images.sh-base-v1)
if up_to_date debian-base "$base_key" "$BASE_REF"; then
  log "debian-base: up to date ($BASE_REF)"
else
  rootfs=$OUT/rootfs-$SUITE
  rm -rf "$rootfs"
  log "debian-base: debootstrap $SUITE from $MIRROR (a few minutes the first time)"
  timed debootstrap debootstrap --variant=minbase "$SUITE" "$rootfs" "$MIRROR"
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
  timed import-base sh -c "tar -C '$rootfs' -c . | podman import --change 'CMD [\"/bin/bash\"]' - '$BASE_REF'"
  rm -rf "$rootfs"
  echo "$base_key" >"$OUT/debian-base.key"
fi

# 2. The Go image of the build stages: the base plus the Go toolchain of this machine. GOPROXY=off:
# the modules come from the host's module cache, mounted into the build (go mod download runs on
# the host first), so nothing is fetched inside a build.
goroot=$(go env GOROOT)
go_key=$(hash_inputs "$base_key" "$GO_VERSION" hack/images.sh-go-v1)
if up_to_date golang "$go_key" "$GO_REF"; then
  log "golang: up to date ($GO_REF)"
else
  ctx=$(mktemp -d)
  trap 'rm -rf "$ctx"' EXIT
  cat >"$ctx/Containerfile" <<EOF
FROM $BASE_REF
COPY go /usr/local/go
ENV PATH=/go/bin:/usr/local/go/bin:/usr/sbin:/usr/bin:/sbin:/bin GOPATH=/go GOPROXY=off GOTOOLCHAIN=local GOFLAGS=-mod=mod
EOF
  cp -a "$goroot" "$ctx/go"
  timed golang podman build --layers=false -t "$GO_REF" -f "$ctx/Containerfile" "$ctx"
  rm -rf "$ctx"
  trap - EXIT
  echo "$go_key" >"$OUT/golang.key"
fi

# The host's module and build caches, shared with the build stages.
timed go-mod-download go mod download
modcache=$(go env GOMODCACHE)
gocache=$(go env GOCACHE)
caches=(-v "$modcache:/go/pkg/mod" -v "$gocache:/root/.cache/go-build")

# save NAME REF KEY: writes the tarball and records the key.
save() {
  rm -f "$OUT/$1.tar"
  timed "save-$1" podman save --format docker-archive -o "$OUT/$1.tar" "$2"
  echo "$3" >"$OUT/$1.key"
}

# 3. The agent and controller images from build/images, on the local bases.
src_key=$(hash_inputs go.mod go.sum cmd pkg "$VERSION")
for comp in agent controller; do
  name=antrea-$comp ref=$REPO/antrea-$comp:$TAG
  base=$BASE_REF
  [ "$comp" = controller ] && base=scratch
  key=$(hash_inputs "$go_key" "$src_key" "$TAG" "$base" build/images/$comp build/images/scripts)
  if up_to_date "$name" "$key" "$ref" && [ -s "$OUT/$name.tar" ]; then
    log "$name: up to date ($ref)"
    continue
  fi
  log "$name: podman build (build/images/$comp/Dockerfile, base $base)"
  timed "$name" podman build "${caches[@]}" -f "build/images/$comp/Dockerfile" \
    --build-arg GO_IMAGE="$GO_REF" --build-arg BASE_IMAGE="$base" --build-arg VERSION="$VERSION" \
    -t "$ref" .
  save "$name" "$ref" "$key"
done

# 4. The pause (sandbox) image and the echo server: one static binary each, FROM scratch.
for name in pause echoserver; do
  ref=$REPO/$name:$TAG
  srcdir=test/cluster/pause
  [ "$name" = echoserver ] && srcdir=test/e2e/echoserver
  key=$(hash_inputs "$GO_VERSION" "$TAG" "$srcdir" "build/images/$name" go.mod go.sum)
  if up_to_date "$name" "$key" "$ref" && [ -s "$OUT/$name.tar" ]; then
    log "$name: up to date ($ref)"
    continue
  fi
  ctx=$(mktemp -d)
  CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$ctx/$name" "./$srcdir"
  timed "$name" podman build -t "$ref" -f "build/images/$name/Dockerfile" "$ctx"
  rm -rf "$ctx"
  save "$name" "$ref" "$key"
done
build_coredns_image
if [ "${IMAGES_E2E:-}" = 1 ]; then build_agnhost_image; fi
log "all images built; tarballs:"
ls -l "$OUT"/*.tar >&2
