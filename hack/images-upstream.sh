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

build_coredns_image() {
  local ref key ctx
  ref=$REPO/coredns:$(coredns_version)
  key=$(hash_inputs "$GO_VERSION" hack/tools/coredns build/images/coredns)
  if up_to_date coredns "$key" "$ref" && [ -s "$OUT/coredns.tar" ]; then
    log "coredns: up to date ($ref)"
    return
  fi
  ctx=$(mktemp -d)
  log "coredns: go build of hack/tools/coredns (about 2 minutes with a cold Go cache)"
  timed coredns-build sh -c "cd hack/tools/coredns && CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o '$ctx/coredns' ."
  timed coredns podman build -t "$ref" -f build/images/coredns/Dockerfile "$ctx"
  rm -rf "$ctx"
  save coredns "$ref" "$key"
}

build_agnhost_image() {
  local ref key ctx src
  ref=$REPO/agnhost:$(agnhost_version)
  src=$(kubernetes_dir)/test/images/agnhost
  key=$(hash_inputs "$base_key" "$GO_VERSION" hack/tools/e2e/go.mod hack/tools/e2e/go.sum build/images/agnhost)
  if up_to_date agnhost "$key" "$ref" && [ -s "$OUT/agnhost.tar" ]; then
    log "agnhost: up to date ($ref)"
    return
  fi
  ctx=$(mktemp -d)
  log "agnhost: building k8s.io/kubernetes/test/images/agnhost $(agnhost_version)"
  timed agnhost-build sh -c "cd hack/tools/e2e && CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o '$ctx/agnhost' k8s.io/kubernetes/test/images/agnhost"
  cp "$src/porter/localhost.crt" "$src/porter/localhost.key" "$ctx/"
  log "agnhost: podman build (build/images/agnhost/Dockerfile, base $BASE_REF; apt-get from Debian)"
  timed agnhost podman build --build-arg BASE_IMAGE="$BASE_REF" -t "$ref" -f build/images/agnhost/Dockerfile "$ctx"
  rm -rf "$ctx"
  save agnhost "$ref" "$key"
}
