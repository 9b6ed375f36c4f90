package framework

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Helpers of the flow-restore-wait tests: an agent started without waiting for its proxier, and
// a proxier kept from ever syncing.

// StartAgentUnsynced starts the node's antrea-agent (after KillAgent) with the sandbox's agent
// options and waits at most timeout, only until its CNI server answers (the gateway and pod flows
// are in by then): not for its proxier, which a test may keep from syncing.
func (n *Node) StartAgentUnsynced(timeout time.Duration) error {
	p, err := n.launchAgent(n.s.agent)
	if err != nil {
		return err
	}
	what := fmt.Sprintf("antrea-agent on %s to serve CNI requests (log %s)", n.Name, p.LogPath)
	return waitReadyOrFail(p, timeout, what, func(context.Context) (bool, string, error) {
		ok, status := n.cniReady()
		return ok, status, nil
	})
}

// SetAgentEndpointSliceAccess grants or revokes antrea-agent's read access to EndpointSlices
// (AgentClusterRole). Without it, an agent started afterwards never syncs its proxier (its
// EndpointSlice cache never fills), while its node data path and CNI server work.
func (s *Sandbox) SetAgentEndpointSliceAccess(ctx context.Context, allowed bool) error {
	roles := s.CP.Client.RbacV1().ClusterRoles()
	role, err := roles.Get(ctx, AgentClusterRole, metav1.GetOptions{})
	if err != nil {
		return err
	}
	for i := range role.Rules {
		r := &role.Rules[i]
		if !slices.Contains(r.APIGroups, "discovery.k8s.io") {
			continue
		}
		r.Resources = slices.DeleteFunc(r.Resources, func(x string) bool { return x == "endpointslices" })
		if allowed {
			r.Resources = append(r.Resources, "endpointslices")
		} else if len(r.Resources) == 0 {
			r.Resources = []string{"no-such-resource"} // a rule needs a resource
		}
		r.Resources = slices.DeleteFunc(r.Resources, func(x string) bool { return allowed && x == "no-such-resource" })
	}
	_, err = roles.Update(ctx, role, metav1.UpdateOptions{})
	return err
}

// launchAgent writes antrea-agent.conf for opts and starts antrea-agent inside the node
// namespace, without waiting for anything.
func (n *Node) launchAgent(opts AgentOptions) (*process, error) {
	cfg := n.agentConfig(opts)
	b, err := cfg.Marshal()
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(n.ConfPath, b, 0o644); err != nil {
		return nil, fmt.Errorf("node %s: writing %s: %w", n.Name, n.ConfPath, err)
	}
	p, err := n.s.startInNS("antrea-agent-"+n.Name, n.NS, filepath.Join(n.s.Bins.Dir, "antrea-agent"),
		"--config", n.ConfPath, "--v=2")
	if err != nil {
		return nil, err
	}
	n.agent, n.agentConf = p, cfg
	return p, nil
}
