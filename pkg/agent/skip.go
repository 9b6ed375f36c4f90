package agent

import (
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/antrea-proxy/antrea-proxy/pkg/config"
	"github.com/antrea-proxy/antrea-proxy/pkg/model"
)

// skipSet hands the proxier the skipServices entries exactly as pkg/config parsed and
// validated them (one parser, one set of rules).
func skipSet(s config.SkipServices) model.SkipSet {
	return model.SkipSet{
		Names: sets.KeySet(s.Names),
		IPs:   sets.KeySet(s.IPs),
	}
}
