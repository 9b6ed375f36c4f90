package loadbalancer

import (
	"slices"

	"github.com/antrea-proxy/antrea-proxy/pkg/lbapi"
)

func hasFinalizer(fs []string) bool { return slices.Contains(fs, lbapi.Finalizer) }
