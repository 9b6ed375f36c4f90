package chart

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	k8stesting "k8s.io/client-go/testing"
)

// The RBAC tests run the binaries' Kubernetes code against a fake clientset, record every API
// call (informers' lists and watches included) and compare them with what the chart grants each
// ServiceAccount: every call must be allowed, and every granted permission must be used.

// grant is one permission: verb on group/resource (resource "services/status" for a subresource),
// cluster-wide (namespace "") or in one namespace, optionally limited to object names.
type grant struct {
	group, resource, verb, namespace string
	names                            []string
}

func (g grant) String() string {
	s := fmt.Sprintf("%s %s", g.verb, qualified(g.group, g.resource))
	if g.namespace != "" {
		s += " in namespace " + g.namespace
	}
	if len(g.names) > 0 {
		s += " named " + strings.Join(g.names, ",")
	}
	return s
}

// call is one API request the code made.
type call struct {
	group, resource, verb, namespace, name string
}

func (c call) String() string {
	s := fmt.Sprintf("%s %s", c.verb, qualified(c.group, c.resource))
	if c.namespace != "" {
		s += " in namespace " + c.namespace
	}
	if c.name != "" {
		s += " " + c.name
	}
	return s
}

func qualified(group, resource string) string {
	if group == "" {
		return resource
	}
	return resource + "." + group
}

func (g grant) allows(c call) bool {
	return g.group == c.group && g.resource == c.resource && g.verb == c.verb &&
		(g.namespace == "" || g.namespace == c.namespace) &&
		(len(g.names) == 0 || slices.Contains(g.names, c.name))
}

// grantsFor returns the permissions the rendered chart gives ServiceAccount sa in Namespace,
// through ClusterRoleBindings (cluster-wide) and RoleBindings (their namespace).
func grantsFor(t *testing.T, r rendering, sa string) []grant {
	t.Helper()
	boundTo := func(subjects []rbacv1.Subject) bool {
		return slices.ContainsFunc(subjects, func(s rbacv1.Subject) bool {
			return s.Kind == rbacv1.ServiceAccountKind && s.Name == sa && s.Namespace == Namespace
		})
	}
	clusterRoles := map[string]*rbacv1.ClusterRole{}
	for _, cr := range all[*rbacv1.ClusterRole](r) {
		clusterRoles[cr.Name] = cr
	}
	roles := map[string]*rbacv1.Role{}
	for _, role := range all[*rbacv1.Role](r) {
		roles[role.Namespace+"/"+role.Name] = role
	}
	var out []grant
	for _, b := range all[*rbacv1.ClusterRoleBinding](r) {
		if !boundTo(b.Subjects) {
			continue
		}
		cr, ok := clusterRoles[b.RoleRef.Name]
		if b.RoleRef.Kind != "ClusterRole" || !ok {
			t.Fatalf("ClusterRoleBinding %s refers to %s %s, which the chart does not render", b.Name, b.RoleRef.Kind, b.RoleRef.Name)
		}
		out = append(out, expand(t, cr.Rules, "")...)
	}
	for _, b := range all[*rbacv1.RoleBinding](r) {
		if !boundTo(b.Subjects) {
			continue
		}
		role, ok := roles[b.Namespace+"/"+b.RoleRef.Name]
		if b.RoleRef.Kind != "Role" || !ok {
			t.Fatalf("RoleBinding %s/%s refers to %s %s, which the chart does not render in its namespace", b.Namespace, b.Name, b.RoleRef.Kind, b.RoleRef.Name)
		}
		out = append(out, expand(t, role.Rules, b.Namespace)...)
	}
	if len(out) == 0 {
		t.Fatalf("the chart grants ServiceAccount %s/%s nothing", Namespace, sa)
	}
	return out
}

// expand turns policy rules into one grant per group, resource and verb. Wildcards and
// non-resource URLs are refused: they are never least privilege.
func expand(t *testing.T, rules []rbacv1.PolicyRule, namespace string) []grant {
	t.Helper()
	var out []grant
	for _, rule := range rules {
		if len(rule.NonResourceURLs) > 0 {
			t.Errorf("rule %v grants non-resource URLs", rule)
		}
		for _, g := range rule.APIGroups {
			for _, res := range rule.Resources {
				for _, v := range rule.Verbs {
					if g == "*" || res == "*" || v == "*" {
						t.Errorf("rule %v uses a wildcard", rule)
					}
					out = append(out, grant{group: g, resource: res, verb: v, namespace: namespace, names: rule.ResourceNames})
				}
			}
		}
	}
	return out
}

// callsOf turns recorded fake-clientset actions into distinct calls.
func callsOf(actions []k8stesting.Action) []call {
	seen := map[call]bool{}
	var out []call
	for _, a := range actions {
		c := call{group: a.GetResource().Group, resource: a.GetResource().Resource, verb: a.GetVerb(), namespace: a.GetNamespace()}
		if sub := a.GetSubresource(); sub != "" {
			c.resource += "/" + sub
		}
		c.name = nameOf(a)
		if !seen[c] {
			seen[c] = true
			out = append(out, c)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// nameOf is the name of the object an action reads or writes ("" for lists and watches).
func nameOf(a k8stesting.Action) string {
	switch a := a.(type) {
	case k8stesting.GetAction: // gets, patches and deletes: they name their object
		return a.GetName()
	case k8stesting.CreateAction: // creates and updates: the name is in the object
		if m, err := meta.Accessor(a.GetObject()); err == nil {
			return m.GetName()
		}
	}
	return ""
}

// compareRBAC fails the test for every call the grants do not allow and every grant no call uses.
func compareRBAC(t *testing.T, who string, grants []grant, calls []call) {
	t.Helper()
	var missing, unused []string
	for _, c := range calls {
		if !slices.ContainsFunc(grants, func(g grant) bool { return g.allows(c) }) {
			missing = append(missing, c.String())
		}
	}
	for _, g := range grants {
		if !slices.ContainsFunc(calls, g.allows) {
			unused = append(unused, g.String())
		}
	}
	var calls2 []string
	for _, c := range calls {
		calls2 = append(calls2, c.String())
	}
	if len(missing) > 0 {
		t.Errorf("%s makes calls its RBAC rules do not allow:\n  %s", who, strings.Join(missing, "\n  "))
	}
	if len(unused) > 0 {
		t.Errorf("%s is granted permissions it never uses:\n  %s", who, strings.Join(unused, "\n  "))
	}
	if t.Failed() {
		t.Logf("calls %s made:\n  %s", who, strings.Join(calls2, "\n  "))
	}
}
