package chart

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// rendering is one decoded `helm template` output.
type rendering struct {
	raw  string
	objs []runtime.Object
}

// render templates the chart with extra helm arguments and decodes it strictly.
func render(t *testing.T, h *Helm, args ...string) rendering {
	t.Helper()
	raw := h.MustTemplate(t, args...)
	objs, err := Decode(raw)
	if err != nil {
		t.Fatalf("decoding the chart rendered with %q: %v", args, err)
	}
	return rendering{raw: raw, objs: objs}
}

// configMap is the one ConfigMap of the chart.
func (r rendering) configMap(t *testing.T) *corev1.ConfigMap {
	t.Helper()
	return only[*corev1.ConfigMap](t, r, "ConfigMap")
}

func (r rendering) daemonSet(t *testing.T) *appsv1.DaemonSet {
	t.Helper()
	return only[*appsv1.DaemonSet](t, r, "DaemonSet")
}

func (r rendering) deployment(t *testing.T) *appsv1.Deployment {
	t.Helper()
	return only[*appsv1.Deployment](t, r, "Deployment")
}

// only returns the single object of type T, failing the test if there is not exactly one.
func only[T runtime.Object](t *testing.T, r rendering, kind string) T {
	t.Helper()
	var found []T
	for _, o := range r.objs {
		if v, ok := o.(T); ok {
			found = append(found, v)
		}
	}
	if len(found) != 1 {
		t.Fatalf("the chart renders %d %s objects, want exactly 1", len(found), kind)
	}
	return found[0]
}

// all returns every object of type T.
func all[T runtime.Object](r rendering) []T {
	var found []T
	for _, o := range r.objs {
		if v, ok := o.(T); ok {
			found = append(found, v)
		}
	}
	return found
}

// container returns the container (or init container) of spec named name.
func container(t *testing.T, spec corev1.PodSpec, name string) corev1.Container {
	t.Helper()
	for _, c := range append(append([]corev1.Container{}, spec.InitContainers...), spec.Containers...) {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("the Pod template has no container %q", name)
	return corev1.Container{}
}

// dataKey returns a key of the ConfigMap, failing if it is missing.
func dataKey(t *testing.T, cm *corev1.ConfigMap, key string) string {
	t.Helper()
	v, ok := cm.Data[key]
	if !ok {
		t.Fatalf("ConfigMap %s has no key %q", cm.Name, key)
	}
	return v
}
