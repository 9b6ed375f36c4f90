# hack/images-upstream.sh is sourced by hack/images.sh: the image of the cluster DNS, built from
# its Go module, no registry.
#
#   localhost/antrea-proxy/coredns:<version>   hack/tools/coredns (slim CoreDNS main) FROM scratch;
#                                              every test cluster runs it as kube-dns
#
# It uses hack/images.sh's REPO, OUT, BASE_REF, GO_VERSION and its helpers (log, timed,
# hash_inputs, up_to_date, save).

coredns_version() { (cd hack/tools/coredns && go list -m -f '{{.Version}}' github.com/coredns/coredns); }

# upstream_image_list prints "<reference> <tarball>" for hack/images.sh --list.
upstream_image_list() {
  echo "$REPO/coredns:$(coredns_version) $OUT/coredns.tar"
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
