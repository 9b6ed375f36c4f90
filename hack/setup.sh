#!/usr/bin/env bash
# hack/setup.sh installs what antrea-proxy's build, tests and demo need on a fresh Debian machine.
# It is the one set-up script: `make test`, `make demo` and .ci/run all call it. It is idempotent
# and quick when everything is already present.
set -euo pipefail

need_pkgs=()
have() { command -v "$1" >/dev/null 2>&1; }
have ovs-vswitchd || need_pkgs+=(openvswitch-switch)
have ovs-ofctl || need_pkgs+=(openvswitch-common)
have ip || need_pkgs+=(iproute2)
have ethtool || need_pkgs+=(ethtool)
have nft || need_pkgs+=(nftables)
have sysctl || need_pkgs+=(procps)
have make || need_pkgs+=(make)
have gcc || need_pkgs+=(gcc)

if [ "${#need_pkgs[@]}" -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: missing packages (${need_pkgs[*]}); run as root or install them with apt-get" >&2
    exit 1
  fi
  echo "setup: installing Debian packages: ${need_pkgs[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}" >/dev/null
  echo "setup: packages installed"
fi

# The Debian package starts a system OVS through its init script on some machines. Our tests run
# their own instances in temporary directories, so the system one is neither needed nor touched.

if ! have go; then
  if [ -x /usr/local/go/bin/go ]; then
    export PATH=/usr/local/go/bin:$PATH
  else
    echo "setup: Go toolchain not found (expected /usr/local/go/bin/go)" >&2
    exit 1
  fi
fi
echo "setup: ok ($(go version | awk '{print $3}'), $(ovs-vswitchd --version | head -1))"
