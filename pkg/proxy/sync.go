package proxy

import (
	"context"
	"fmt"
	"net/netip"
	"sort"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"

	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/pipeline"
	"github.com/antrea-proxy/antrea-proxy/pkg/proxy/metrics"
	"github.com/antrea-proxy/antrea-proxy/pkg/proxy/model"
	"github.com/antrea-proxy/antrea-proxy/pkg/proxy/tracker"
)

// bigSyncOps is the bundle size from which a sync tells the user what it is doing.
const bigSyncOps = 2000

// ourCategories are the cookie categories this proxier owns and cleans up across rounds.
var ourCategories = []pipeline.Category{pipeline.CategoryBase, pipeline.CategoryService, pipeline.CategoryEndpoint}

// start picks this run's round and prepares the clean-up of what earlier runs left in OVS.
func (p *Proxier) start(ctx context.Context) error {
	prev, ok, err := p.rounds.LoadRound(ctx)
	if err != nil {
		return fmt.Errorf("loading flow round: %w", err)
	}
	round := uint16(1)
	if ok {
		round = prev + 1
		if round == 0 {
			round = 1
		}
	}
	flows, err := p.bridge.DumpFlows(ctx, of.FlowFilter{})
	if err != nil {
		return fmt.Errorf("dumping existing flows: %w", err)
	}
	type rc struct {
		round uint16
		cat   pipeline.Category
	}
	staleSet := map[rc]bool{}
	for _, f := range flows {
		cat, r := pipeline.CookieCategory(f.Cookie), pipeline.CookieRound(f.Cookie)
		for _, c := range ourCategories {
			if cat == c && r != round {
				staleSet[rc{r, cat}] = true
			}
		}
	}
	var stale []rc
	for k := range staleSet {
		stale = append(stale, k)
	}
	sort.Slice(stale, func(i, j int) bool {
		if stale[i].round != stale[j].round {
			return stale[i].round < stale[j].round
		}
		return stale[i].cat < stale[j].cat
	})
	p.stale = nil
	for _, s := range stale {
		p.stale = append(p.stale, of.Op{Kind: of.DeleteFlows, Flow: &of.Flow{
			Cookie:     pipeline.Cookie(s.round, s.cat, 0),
			CookieMask: pipeline.RoundMask | pipeline.CategoryMask,
		}})
	}
	groups, err := p.bridge.DumpGroups(ctx)
	if err != nil {
		return fmt.Errorf("dumping existing groups: %w", err)
	}
	for _, g := range groups {
		p.state.preexisting[g.ID] = true
	}
	p.round = round
	klog.InfoS("Starting flow round", "round", round, "previousRound", prev, "staleRounds", len(stale), "existingGroups", len(groups))
	return nil
}

func (p *Proxier) nodeConfig() pipeline.NodeConfig {
	return pipeline.NodeConfig{
		Round:             p.round,
		IPv4:              p.families().IPv4,
		IPv6:              p.families().IPv6,
		GatewayOFPort:     p.opts.GatewayOFPort,
		GatewayIPv4:       p.opts.GatewayIPv4,
		GatewayIPv6:       p.opts.GatewayIPv6,
		NodePortAddresses: nodePortAddresses(p.node, p.opts.NodePortAddresses, p.families()),
		NodeName:          p.opts.NodeName,
		Zone:              nodeZone(p.node),
	}
}

// families returns the IP families served: those configured, or, when none is, the families of
// this Node's podCIDRs (else of its InternalIPs), IPv4 until the Node is known.
func (p *Proxier) families() model.Families {
	if p.opts.Families.IPv4 || p.opts.Families.IPv6 {
		return p.opts.Families
	}
	var f model.Families
	if p.node != nil {
		cidrs := p.node.Spec.PodCIDRs
		if len(cidrs) == 0 && p.node.Spec.PodCIDR != "" {
			cidrs = []string{p.node.Spec.PodCIDR}
		}
		for _, c := range cidrs {
			if pr, err := netip.ParsePrefix(c); err == nil {
				f.IPv4 = f.IPv4 || pr.Addr().Is4()
				f.IPv6 = f.IPv6 || pr.Addr().Is6()
			}
		}
		if !f.IPv4 && !f.IPv6 {
			for _, a := range p.node.Status.Addresses {
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
func nodeZone(n *v1.Node) string {
	if n == nil {
		return ""
	}
	return n.Labels[v1.LabelTopologyZone]
}

func ownerOf(name model.ServicePortName, ipv6 bool) owner {
	fam := "v4"
	if ipv6 {
		fam = "v6"
	}
	return owner(name.String() + "/" + fam)
}

// desired is what one Service needs: per owner, its group and flows.
type desired struct {
	owner      owner
	clusterGID uint32
	port       model.ServicePort
	endpoints  []model.Endpoint
	ipv6       bool
	flows      pipeline.ServicePortFlows
}

// computeService returns the desired state of one Service (nil when it is gone or skipped).
func (p *Proxier) computeService(nn types.NamespacedName) ([]desired, string) {
	svc := p.services[nn]
	if svc == nil {
		return nil, "deleted"
	}
	if skip, why := model.ShouldSkipService(svc, p.opts.ServiceProxyName, p.opts.Skip); skip {
		return nil, why
	}
	ports := model.ServicePortsFromService(svc, model.ConvertOptions{
		ProxyLoadBalancerIPs: p.opts.ProxyLoadBalancerIPs, Served: p.families(), NodeName: p.opts.NodeName})
	eps := model.EndpointsForService(p.track.Endpoints.SlicesFor(nn), nn, p.opts.NodeName, p.families())
	n := p.nodeConfig()
	var out []desired
	for _, sp := range ports {
		for _, ipv6 := range []bool{false, true} {
			if !hasFamily(sp.ClusterIPs, ipv6) {
				continue
			}
			o := ownerOf(sp.Name, ipv6)
			in := pipeline.ServicePortInput{Port: sp, Endpoints: eps[sp.Name], IPv6: ipv6, GroupID: p.groups.get(o)}
			if sp.InternalPolicyLocal || sp.ExternalPolicyLocal {
				in.LocalGroupID = p.groups.get(localOwner(o))
			}
			flows := pipeline.ServicePort(n, in)
			out = append(out, desired{owner: o, clusterGID: in.GroupID, port: sp, endpoints: eps[sp.Name], ipv6: ipv6, flows: flows})
		}
	}
	return out, ""
}

// localOwner names the local group's ID allocation of an owner.
func localOwner(o owner) owner { return o + "/local" }

func hasFamily(ips []netip.Addr, ipv6 bool) bool {
	for _, ip := range ips {
		if ip.Is6() == ipv6 {
			return true
		}
	}
	return false
}

// syncOnce drains the trackers and installs the difference, then tells the observer. On
// failure nothing is recorded as installed and the same Services are retried by the next sync.
func (p *Proxier) syncOnce(ctx context.Context, full bool) error {
	res, err := p.syncLocked(ctx, full)
	if o := p.opts.Observer; o != nil {
		o.SyncDone(res)
	}
	return err
}

func (p *Proxier) syncLocked(ctx context.Context, full bool) (metrics.SyncResult, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	start := p.opts.Clock.Now()
	if !p.started {
		if err := p.start(ctx); err != nil {
			p.syncErr = err
			klog.ErrorS(err, "Proxier start-up failed; will retry")
			return p.syncResult(start, full, tracker.Drained{}, nil, err), err
		}
		p.started = true
		full = true
	}
	drained := p.track.Drain()
	for nn, ch := range drained.ServiceChanges {
		if ch.Current == nil {
			delete(p.services, nn)
		} else {
			p.services[nn] = ch.Current
		}
	}
	p.dirty = p.dirty.Union(drained.Services())
	first := p.syncs == 0
	if full {
		for nn := range p.services {
			p.dirty.Insert(nn)
		}
		for nn := range p.svcOwners {
			p.dirty.Insert(nn)
		}
	}
	if fam := p.families(); fam != p.lastFamilies {
		// The served families changed (the Node got its podCIDRs): every Service changes.
		p.lastFamilies = fam
		for nn := range p.services {
			p.dirty.Insert(nn)
		}
		for nn := range p.svcOwners {
			p.dirty.Insert(nn)
		}
	}
	tx := p.state.begin()
	if full || p.baseDirty {
		tx.set(baseOwner, nil, pipeline.BaseFlows(p.nodeConfig()))
	}
	newOwners := map[types.NamespacedName][]owner{}
	var released []owner
	computed := map[types.NamespacedName][]desired{}
	for _, nn := range sortedNames(p.dirty) {
		want, _ := p.computeService(nn)
		computed[nn] = want
		keep := map[owner]bool{}
		for _, d := range want {
			keep[d.owner] = true
			flows := append(append([]of.Flow(nil), d.flows.Flows...), d.flows.EndpointFlows...)
			tx.set(d.owner, d.flows.Groups, flows)
			newOwners[nn] = append(newOwners[nn], d.owner)
		}
		for _, o := range p.svcOwners[nn] {
			if !keep[o] {
				tx.set(o, nil, nil)
				released = append(released, o)
			}
		}
	}
	if first {
		tx.extraDeletes = p.stale
		used := map[uint32]bool{}
		for _, gs := range tx.groups {
			for _, g := range gs {
				used[g.ID] = true
			}
		}
		for id := range p.state.preexisting {
			if !used[id] {
				tx.dropPreexisting = append(tx.dropPreexisting, id)
			}
		}
		sort.Slice(tx.dropPreexisting, func(i, j int) bool { return tx.dropPreexisting[i] < tx.dropPreexisting[j] })
	}
	ops := tx.ops()
	if len(ops) > 0 {
		big := len(ops) >= bigSyncOps
		if big {
			klog.InfoS("Installing a large batch of flows and groups in one bundle", "ops", len(ops), "services", p.dirty.Len(), "full", full)
		}
		applyStart := p.opts.Clock.Now()
		err := p.bridge.Apply(ctx, ops)
		if big && err == nil {
			klog.InfoS("Installed the batch", "ops", len(ops), "duration", p.opts.Clock.Since(applyStart))
		}
		if err != nil {
			p.syncErr = err
			klog.ErrorS(err, "Installing flows failed; will retry", "services", p.dirty.Len(), "ops", len(ops))
			return p.syncResult(start, full, drained, computed, err), err
		}
	}
	tx.commit()
	var flushes []udpFlush
	npAddrs := p.nodeConfig().NodePortAddresses
	for _, want := range computed {
		for _, d := range want {
			flushes = append(flushes, udpFlushes(d, p.ownerEndpoints[d.owner].endpoints, npAddrs)...)
		}
	}
	for _, o := range released {
		flushes = append(flushes, goneFlushes(p.ownerEndpoints[o])...)
		delete(p.ownerEndpoints, o)
	}
	for _, want := range computed {
		for _, d := range want {
			p.ownerEndpoints[d.owner] = selectedOf(d)
		}
	}
	p.flushConntrack(ctx, flushes)
	if first {
		p.stale = nil
		if err := p.rounds.SaveRound(ctx, p.round); err != nil {
			// The flows are installed; a lost round only means the next start also cleans this one.
			klog.ErrorS(err, "Saving flow round failed", "round", p.round)
		}
	}
	for _, o := range released {
		p.groups.release(o)
		p.groups.release(localOwner(o))
	}
	now := p.opts.Clock.Now()
	for nn, want := range computed {
		if len(newOwners[nn]) == 0 {
			delete(p.svcOwners, nn)
			delete(p.status, nn)
			continue
		}
		p.svcOwners[nn] = newOwners[nn]
		p.status[nn] = p.makeStatus(want, now)
	}
	p.dirty = sets.New[types.NamespacedName]()
	p.baseDirty = false
	p.syncErr = nil
	p.lastSync = now
	p.syncs++
	klog.V(2).InfoS("Synced", "full", full, "services", len(computed), "ops", len(ops), "duration", now.Sub(start))
	return p.syncResult(start, full, drained, computed, nil), nil
}

func sortedNames(s sets.Set[types.NamespacedName]) []types.NamespacedName {
	out := s.UnsortedList()
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}
