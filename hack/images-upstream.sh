# hack/images-upstream.sh is sourced by hack/images.sh: the images of the cluster DNS and of the
# upstream Kubernetes e2e suite, built from Go modules, no registry.
#
#   localhost/antrea-proxy/coredns:<version>   hack/tools/coredns (slim CoreDNS main) FROM scratch;
#                                              every test cluster runs it as kube-dns
#   localhost/antrea-proxy/agnhost:<version>   k8s.io/kubernetes/test/images/agnhost of hack/tools/e2e
#                                              on the Debian base with the tools its specs call;
#                                              only with IMAGES_E2E=1 (make test-upstream-e2e),
#                                              named so that KUBE_TEST_REPO_LIST's
#                                              promoterE2eRegistry=localhost/antrea-proxy finds it
#
# It uses hack/images.sh's REPO, OUT, BASE_REF, GO_VERSION and its helpers (log, timed,
# hash_inputs, up_to_date, save).

coredns_version() { (cd hack/tools/coredns && go list -m -f '{{.Version}}' github.com/coredns/coredns); }
kubernetes_dir() { (cd hack/tools/e2e && go list -m -f '{{.Dir}}' k8s.io/kubernetes); }
agnhost_version() { cat "$(kubernetes_dir)/test/images/agnhost/VERSION"; }

# upstream_image_list prints "<reference> <tarball>" for hack/images.sh --list.
upstream_image_list() {
  echo "$REPO/coredns:$(coredns_version) $OUT/coredns.tar"
  if [ "${IMAGES_E2E:-}" = 1 ]; then
    echo "$REPO/agnhost:$(agnhost_version) $OUT/agnhost.tar"
  fi
}

# image_from_module NAME REF KEY MODDIR PKG [FILE...] [-- PODMAN_BUILD_ARG...]: unless NAME is
# up to date with KEY, compiles PKG in the module MODDIR (static) into a build context with the
# FILEs, builds build/images/NAME/Dockerfile there as REF and saves it.
image_from_module() {
  local name=$1 ref=$2 key=$3 moddir=$4 pkg=$5 ctx
  shift 5
  if up_to_date "$name" "$key" "$ref" && [ -s "$OUT/$name.tar" ]; then
    log "$name: up to date ($ref)"
    return
  fi
  ctx=$(mktemp -d)
  log "$name: go build of $pkg ($moddir)"
  timed "$name-build" sh -c "cd '$moddir' && CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o '$ctx/$name' '$pkg'"
  while [ $# -gt 0 ] && [ "$1" != -- ]; do
    cp "$1" "$ctx/"
    shift
  done
  [ $# -gt 0 ] && shift
  log "$name: podman build (build/images/$name/Dockerfile)"
  timed "$name" podman build "$@" -t "$ref" -f "build/images/$name/Dockerfile" "$ctx"
  rm -rf "$ctx"
  save "$name" "$ref" "$key"
}

build_coredns_image() {
  image_from_module coredns "$REPO/coredns:$(coredns_version)" \
    "$(hash_inputs "$GO_VERSION" hack/tools/coredns build/images/coredns)" hack/tools/coredns .
}

# agnhost's image: the binary, the porter's test certificate, and (RUN apt-get) its tools on the
# Debian base.
build_agnhost_image() {
  local src
  src=$(kubernetes_dir)/test/images/agnhost
  image_from_module agnhost "$REPO/agnhost:$(agnhost_version)" \
    "$(hash_inputs "$base_key" "$GO_VERSION" hack/tools/e2e/go.mod hack/tools/e2e/go.sum build/images/agnhost)" \
    hack/tools/e2e k8s.io/kubernetes/test/images/agnhost "$src/porter/localhost.crt" "$src/porter/localhost.key" \
    -- --build-arg BASE_IMAGE="$BASE_REF"
}
