package framework

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/util/retry"
)

// This file holds the helpers of the topology tests (test/e2e/semantics_topology_test.go): a
// node's zone label and a Service's EndpointSlices.

// SetNodeZone sets the topology.kubernetes.io/zone label of the node's Node object to zone (as
// a cloud provider would); the agents and the endpointslice controller read it from there.
func (s *Sandbox) SetNodeZone(ctx context.Context, n *Node, zone string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := s.CP.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("getting Node %s: %w", n.Name, err)
		}
		if cur.Labels == nil {
			cur.Labels = map[string]string{}
		}
		cur.Labels[corev1.LabelTopologyZone] = zone
		if _, err := s.CP.Client.CoreV1().Nodes().Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("labelling Node %s with zone %q: %w", n.Name, zone, err)
		}
		return nil
	})
}

// ServiceSlices lists the EndpointSlices of a Service (labelled kubernetes.io/service-name).
func (s *Sandbox) ServiceSlices(ctx context.Context, namespace, service string) ([]discoveryv1.EndpointSlice, error) {
	sel := labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: service}).String()
	list, err := s.CP.Client.DiscoveryV1().EndpointSlices(namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("listing the EndpointSlices of Service %s/%s: %w", namespace, service, err)
	}
	return list.Items, nil
}
