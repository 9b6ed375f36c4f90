package proxy

import (
	"cmp"
	"context"
	"net/netip"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"

	"github.com/antrea-proxy/antrea-proxy/pkg/model"
	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/pipeline"
	"github.com/antrea-proxy/antrea-proxy/pkg/proxy/observe"
	"github.com/antrea-proxy/antrea-proxy/pkg/proxy/tracker"
	"github.com/antrea-proxy/antrea-proxy/pkg/reconciler"
)

// bigSyncOps is the bundle size from which a sync tells the user what it is doing.
const bigSyncOps = 2000

func (p *Proxier) nodeConfig() pipeline.NodeConfig {
	return pipeline.NodeConfig{
		Round:             p.round,
		IPv4:              p.families().IPv4,
		IPv6:              p.families().IPv6,
		GatewayOFPort:     p.opts.GatewayOFPort,
		GatewayIPv4:       p.opts.GatewayIPv4,
		GatewayIPv6:       p.opts.GatewayIPv6,
		NodePortAddresses: model.NodePortAddresses(p.syncNode, p.opts.NodePortAddresses, p.families()),
		NodeIPs:           nodeIPs(p.syncNode, p.families()),
		PeerNodeIPs:       p.syncPeers,
		NodeName:          p.opts.NodeName,
		Zone:              nodeZone(p.syncNode),
		ServiceCIDRs:      p.syncCIDRs,
		ExemptClusterIPs:  p.exemptIPs(),

		RejectMeters:            p.opts.RejectMeters,
		AffinityFlowsPerService: p.opts.AffinityFlowsPerService,
	}
}

// families returns the IP families served: those configured, or, when none is, the families of
// this Node's podCIDRs (else of its InternalIPs), IPv4 until the Node is known.
func (p *Proxier) families() model.Families {
	if p.opts.Families.IPv4 || p.opts.Families.IPv6 {
		return p.opts.Families
	}
	var f model.Families
	if p.syncNode != nil {
		f = model.FamiliesOf(model.NodePodCIDRs(p.syncNode))
		if !f.IPv4 && !f.IPv6 {
			for _, a := range p.syncNode.Status.Addresses {
				if a.Type != v1.NodeInternalIP {
					continue
				}
				if ip, err := netip.ParseAddr(a.Address); err == nil {
					f.IPv4 = f.IPv4 || ip.Unmap().Is4()
					f.IPv6 = f.IPv6 || !ip.Unmap().Is4()
				}
			}
		}
	}
	if !f.IPv4 && !f.IPv6 {
		f.IPv4 = true
	}
	return f
}

// nodeZone is the node's topology.kubernetes.io/zone label.
// nodeIPs returns the InternalIPs of n of a family fam serves, unmapped, in status order.
func nodeIPs(n *v1.Node, fam model.Families) []netip.Addr {
	if n == nil {
		return nil
	}
	var out []netip.Addr
	for _, a := range n.Status.Addresses {
		if a.Type != v1.NodeInternalIP {
			continue
		}
		if ip, err := netip.ParseAddr(a.Address); err == nil && fam.Serves(ip.Unmap()) {
			out = append(out, ip.Unmap())
		}
	}
	return out
}

func nodeZone(n *v1.Node) string {
	if n == nil {
		return ""
	}
	return n.Labels[v1.LabelTopologyZone]
}

// owner names who owns a set of flows and groups in the installed state: one Service port in
// one family (reconciler.KindServicePort, "ns/name:port/TCP/v4", holding its cluster group
// and, with a Local traffic policy, its local group), or baseOwner() for node-level flows.
type owner = reconciler.Owner

// baseOwner owns the node-level flows.
func baseOwner() owner { return owner{Kind: reconciler.KindNode} }

func ownerOf(name model.ServicePortName, ipv6 bool) owner {
	if ipv6 {
		return owner{Kind: reconciler.KindServicePort, Key: name.StringWith("/v6")}
	}
	return owner{Kind: reconciler.KindServicePort, Key: name.StringWith("/v4")}
}

// localOwner names the local group of an owner, whose second-level groups are named after it
// (subOwner).
func localOwner(o owner) owner { return owner{Kind: o.Kind, Key: o.Key + "/local"} }

func hasFamily(ips []netip.Addr, ipv6 bool) bool {
	for _, ip := range ips {
		if ip.Is6() == ipv6 {
			return true
		}
	}
	return false
}

// syncInput is what one sync works on, gathered on the sync goroutine.
type syncInput struct {
	start   time.Time
	full    bool
	first   bool
	drained tracker.Drained
	nodeGen uint64
	// base is the node-level flows to set (setBase false: unchanged), nodePortAddrs the
	// NodePort addresses they serve.
	setBase       bool
	base          []of.Flow
	nodePortAddrs []netip.Addr
	// cidrs are the ServiceCIDRs the base flows serve (with setBase).
	cidrs []netip.Prefix
	// issues are, per planned Service, the addresses it asked for and does not get.
	issues map[types.NamespacedName][]addrIssue
	// names are the Services planned, sorted; computed their desired state (nil = gone).
	names    []types.NamespacedName
	computed map[types.NamespacedName][]desired
	// inputs are what each planned Service was computed from (committed with it).
	inputs map[types.NamespacedName]svcInputs
	// stale, staleCurrent and staleGroups are the first bundle's clean-up.
	stale, staleCurrent []of.Op
	staleGroups         []uint32
}

// syncOnce runs one sync and tells the observer. On failure nothing is recorded as installed
// and the same Services are retried by the next sync.
func (p *Proxier) syncOnce(ctx context.Context, full bool) error {
	select {
	case p.syncSem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-p.syncSem }()
	res, err := p.sync(ctx, full)
	if o := p.opts.Observer; o != nil {
		o.SyncDone(res)
	}
	return err
}

// sync is one pass of gather, plan + apply, commit and after-commit work.
func (p *Proxier) sync(ctx context.Context, full bool) (observe.SyncResult, error) {
	start := p.opts.Clock.Now()
	if !p.started {
		if err := p.start(ctx); err != nil {
			p.setSyncErr(err)
			klog.ErrorS(err, "Proxier start-up failed; will retry")
			return p.syncResult(start, full, tracker.Drained{}, nil, err), err
		}
		p.started = true
		full = true
	} else if full {
		defer p.checkDrift(ctx)
	}
	in := p.gather(start, full)
	pl, rejected, err := p.planAndApply(ctx, in)
	if err != nil {
		p.setSyncErr(err)
		klog.ErrorS(err, "Installing flows failed; will retry", "services", len(in.names))
		return p.syncResult(start, in.full, in.drained, nil, err), err
	}
	udpDirty, events := p.commit(in, pl, rejected)
	// The conntrack reconciler runs after every sync that changed what a UDP Service port
	// serves, after the first sync of a start, and with every periodic full resync that has
	// UDP owners to compare (conntrackOwed).
	ct := p.afterCommit(ctx, udpDirty || in.first || (in.full && p.conntrackOwed()), events)
	included := make(map[types.NamespacedName][]desired, len(pl.included))
	for _, nn := range pl.included {
		included[nn] = in.computed[nn]
	}
	klog.V(2).InfoS("Synced", "full", in.full, "services", len(pl.included), "quarantined", len(rejected),
		"ops", len(pl.ops), "duration", p.opts.Clock.Since(start))
	res := p.syncResult(start, in.full, in.drained, included, nil)
	res.Conntrack = ct
	return res, nil
}

// gather drains the trackers, takes this sync's node snapshot, marks dirty Services and
// computes the desired state of those due (a quarantined Service waits for its retry time).
func (p *Proxier) gather(start time.Time, full bool) *syncInput {
	p.mu.Lock()
	p.syncNode = p.node
	// A new slice each sync: a NodeConfig built from the previous one may still be held.
	p.syncPeers = nil
	for _, ips := range p.peers {
		p.syncPeers = append(p.syncPeers, ips...)
	}
	slices.SortFunc(p.syncPeers, func(a, b netip.Addr) int { return a.Compare(b) })
	in := &syncInput{start: start, full: full, first: p.syncs == 0, nodeGen: p.nodeGen}
	in.setBase = full || p.baseDirty || in.first
	cidrs, cidrGen := p.serviceCIDRs, p.cidrGen
	p.mu.Unlock()
	in.drained = p.track.Drain()
	p.mu.Lock()
	for nn, ch := range in.drained.ServiceChanges {
		p.setService(nn, ch.Current)
	}
	p.mu.Unlock()
	nodeChanged := p.noteNodeInputs()
	// The flow budget is decided from counts before any claim or flow is built; a Service it
	// refuses claims nothing and is computed as having no port.
	flipped := p.noteBudget(in.drained.Services(), nodeChanged)
	if p.noteAddrInputs(in.drained, cidrs, cidrGen) {
		in.setBase = true
	}
	for _, nn := range flipped {
		p.reclaim(nn)
		p.dirty.Insert(nn)
	}
	p.dirtyDrained(in.drained)
	// A full resync recomputes only the Services whose inputs changed since their last
	// committed computation; a change of the node-level inputs (the served families, the zone)
	// changes every Service. Every input change also marks its Services dirty where it happens,
	// so the walk is a safety net: a full resync skips it when no input moved since the last one.
	slicesGen := p.track.Endpoints.LastGeneration()
	p.walk.due = p.walk.due || len(in.drained.ServiceChanges) > 0 || len(flipped) > 0 ||
		cidrGen != p.walk.cidrGen || slicesGen != p.walk.slicesGen
	if all := nodeChanged || (full && p.recomputeAll); all || (full && p.walk.due) {
		p.walk = resyncWalk{slicesGen: slicesGen, cidrGen: cidrGen, count: p.walk.count + 1}
		p.markChanged(all)
	}
	n := p.nodeConfig()
	if in.setBase {
		in.base, in.nodePortAddrs, in.cidrs = pipeline.BaseFlows(n), n.NodePortAddresses, n.ServiceCIDRs
	}
	in.computed = make(map[types.NamespacedName][]desired, len(p.dirty))
	in.inputs = make(map[types.NamespacedName]svcInputs, len(p.dirty))
	in.issues = map[types.NamespacedName][]addrIssue{}
	c := p.newComputation(n, len(p.dirty))
	for _, nn := range sortedNames(p.dirty) {
		if q := p.quarantine[nn]; q != nil && p.service(nn) != nil && !p.budget.isRefused(nn) && start.Before(q.next) {
			continue
		}
		in.inputs[nn] = p.inputsOf(nn)
		c.prepare(nn)
	}
	c.run()
	in.names = c.names
	for i, nn := range c.names {
		in.computed[nn] = c.jobs[i].want
		if len(c.jobs[i].issues) > 0 {
			in.issues[nn] = c.jobs[i].issues
		}
	}
	if in.first {
		in.stale, in.staleCurrent, in.staleGroups = p.stale, p.staleCurrent, p.staleGroups
		p.mu.Lock()
		if p.earlyBase {
			in.staleCurrent = p.earlyBaseDelete(in.staleCurrent)
		}
		p.mu.Unlock()
	}
	return in
}

func (p *Proxier) setSyncErr(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.syncErr = err
}

// sortedNames returns the names of s ordered as their "namespace/name" strings are.
func sortedNames(s sets.Set[types.NamespacedName]) []types.NamespacedName {
	out := s.UnsortedList()
	slices.SortFunc(out, compareNames)
	return out
}

// compareNames compares a and b as their "namespace/name" strings (NamespacedName.String)
// compare, without building them.
func compareNames(a, b types.NamespacedName) int {
	if a.Namespace == b.Namespace {
		return strings.Compare(a.Name, b.Name)
	}
	la, lb := len(a.Namespace)+1+len(a.Name), len(b.Namespace)+1+len(b.Name)
	for i := 0; i < la && i < lb; i++ {
		if ca, cb := nameByte(a, i), nameByte(b, i); ca != cb {
			return cmp.Compare(ca, cb)
		}
	}
	return cmp.Compare(la, lb)
}

// nameByte is byte i of nn's "namespace/name" string.
func nameByte(nn types.NamespacedName, i int) byte {
	switch {
	case i < len(nn.Namespace):
		return nn.Namespace[i]
	case i == len(nn.Namespace):
		return '/'
	}
	return nn.Name[i-len(nn.Namespace)-1]
}
