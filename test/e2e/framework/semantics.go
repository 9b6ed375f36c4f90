package framework

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// This file holds the helpers of the Service semantics tests (test/e2e/semantics_*_test.go):
// more external clients, the host's NodePort rules, the bridge's flows of one table, and HTTP
// answers of any status.

// AddExternalClient attaches another external client to the underlay: a namespace called
// NSPrefix+role with address ip, whose default gateway is the router and which reaches the
// VIP-mode LoadBalancer IPs through the first node, as the sandbox's own client does. role must
// be at most 7 characters; the namespace is removed with the sandbox.
func (s *Sandbox) AddExternalClient(role string, ip netip.Addr) (*NetNS, error) {
	if !UnderlaySubnet.Contains(ip) {
		return nil, fmt.Errorf("external client %s: %s is not in the underlay %s", role, ip, UnderlaySubnet)
	}
	ns, err := s.newNS(role)
	if err != nil {
		return nil, err
	}
	if err := s.Net.Attach(ns, role, ip); err != nil {
		return nil, err
	}
	if err := ns.MustExec(
		[]string{"ip", "route", "add", "default", "via", RouterIP.String()},
		[]string{"ip", "route", "replace", VIPRange.String(), "via", s.Nodes[0].IP.String()},
	); err != nil {
		return nil, err
	}
	return ns, nil
}

// nftTable is the agent's nftables table (docs/design/ovs-pipeline.md, "The host side").
const nftTable = "antrea-proxy"

// NodePortRuleInstalled reports whether the node's host DNATs proto ("tcp" or "udp") traffic to
// its own address on port into OVS: the agent's nodeports-v4 set has the element.
func (n *Node) NodePortRuleInstalled(proto string, port int) (bool, error) {
	out, err := n.NS.Exec("nft", "list", "set", "inet", nftTable, "nodeports-v4")
	if err != nil {
		return false, fmt.Errorf("node %s: listing the NodePort set: %w: %s", n.Name, err, out)
	}
	want := n.IP.String() + " . " + proto + " . " + strconv.Itoa(port)
	return strings.Contains(out, want), nil
}

// WaitNodePort waits until every node's host sends proto traffic to its address and port into
// OVS (the agent syncs the host rules after the flows).
func (s *Sandbox) WaitNodePort(ctx context.Context, proto string, port int) error {
	what := fmt.Sprintf("every node to DNAT %s NodePort %d into OVS", proto, port)
	return Poll(ctx, time.Minute, what, func(context.Context) (bool, string, error) {
		for _, n := range s.Nodes {
			ok, err := n.NodePortRuleInstalled(proto, port)
			if err != nil {
				return false, err.Error(), nil
			}
			if !ok {
				return false, n.Name + ": not in the nodeports-v4 set", nil
			}
		}
		return true, "", nil
	})
}

// TableFlows dumps the flows of one table of the node's bridge (without statistics).
func (n *Node) TableFlows(table int) ([]string, error) {
	out, err := n.OVS.Ofctl("dump-flows", Bridge, "--no-stats", "table="+strconv.Itoa(table))
	if err != nil {
		return nil, fmt.Errorf("node %s: dumping table %d: %w", n.Name, table, err)
	}
	var flows []string
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "OFPST_") || strings.HasPrefix(line, "NXST_") {
			continue
		}
		flows = append(flows, line)
	}
	return flows, nil
}

// HTTPStatus fetches url from inside ns and returns the status code and the body, whatever the
// status.
func (n *NetNS) HTTPStatus(ctx context.Context, url string) (int, []byte, error) {
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: n.Dial, DisableKeepAlives: true}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("GET %s from netns %s: %w", url, n.Name, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return resp.StatusCode, nil, fmt.Errorf("GET %s from netns %s: reading the body: %w", url, n.Name, err)
	}
	return resp.StatusCode, body, nil
}
