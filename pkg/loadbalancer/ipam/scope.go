package ipam

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
)

// Scope restricts which Services may use a pool, as MetalLB's
// IPAddressPool serviceAllocation does. The zero Scope lets every Service
// use the pool, automatically too.
type Scope struct {
	// Namespaces and NamespaceSelector: a Service may use the pool when its
	// namespace is listed or its namespace's labels match the selector
	// (either suffices). Both unset means every namespace.
	Namespaces        []string
	NamespaceSelector labels.Selector
	// ServiceSelector, when set, must match the Service's labels.
	ServiceSelector labels.Selector
	// Manual keeps the pool out of automatic allocation: only Services
	// naming it or requesting one of its addresses use it (autoAssign: false).
	Manual bool
	// CrossNamespaceSharing lets Services of different namespaces share an
	// address of the pool.
	CrossNamespaceSharing bool
}

// Subject is what a Scope looks at: the Service's namespace, its
// namespace's labels (nil when unknown) and its labels.
type Subject struct {
	Namespace       string
	NamespaceLabels map[string]string
	Labels          map[string]string
}

// refusal returns why the pool may not serve s, or "" when it may.
func (p *Pool) refusal(s Subject) string {
	sc := p.Scope
	if len(sc.Namespaces) > 0 || sc.NamespaceSelector != nil {
		listed := slices.Contains(sc.Namespaces, s.Namespace)
		selected := sc.NamespaceSelector != nil && sc.NamespaceSelector.Matches(labels.Set(s.NamespaceLabels))
		if !listed && !selected {
			var what []string
			if len(sc.Namespaces) > 0 {
				what = append(what, fmt.Sprintf("namespaces %v", sc.Namespaces))
			}
			if sc.NamespaceSelector != nil {
				what = append(what, fmt.Sprintf("namespaceSelector %q", sc.NamespaceSelector))
			}
			return fmt.Sprintf("pool %q is not for namespace %q (%s)", p.Name, s.Namespace, strings.Join(what, " or "))
		}
	}
	if sc.ServiceSelector != nil && !sc.ServiceSelector.Matches(labels.Set(s.Labels)) {
		return fmt.Sprintf("pool %q is not for this Service: its labels do not match serviceSelector %q", p.Name, sc.ServiceSelector)
	}
	return ""
}

// shareable reports whether Services of namespaces a and b may share an
// address of the pool.
func (p *Pool) shareable(a, b string) bool { return a == b || p.Scope.CrossNamespaceSharing }
