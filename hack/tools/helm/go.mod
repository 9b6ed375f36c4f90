// Module helm pins the Helm version that hack/build-helm.sh builds for `make helm` and the chart tests.
// It is a separate module so the main module does not depend on helm.sh/helm/v3.
module github.com/antrea-proxy/antrea-proxy/hack/tools/helm

go 1.26.0

require helm.sh/helm/v3 v3.22.0 // indirect
