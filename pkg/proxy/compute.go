package proxy

import (
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/antrea-proxy/antrea-proxy/pkg/model"
	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/pipeline"
	"github.com/antrea-proxy/antrea-proxy/pkg/reconciler"
)

// desired is what one Service needs: per owner, its group and flows.
type desired struct {
	owner      owner
	clusterGID uint32
	localGID   uint32 // 0 without a Local traffic policy
	// subGIDs and localSubGIDs are the second-level group IDs of a Service with more endpoints
	// than one group holds (allocSubGroups); nil otherwise.
	subGIDs, localSubGIDs []uint32
	port                  model.ServicePort
	endpoints             []model.Endpoint
	ipv6                  bool
	flows                 pipeline.ServicePortFlows
	// all is flows.Flows then flows.EndpointFlows in one slice (the two are views of it when
	// both are set), what the plan stages; keys and sums are its flows' keys and digests.
	all  []of.Flow
	keys []string
	sums []reconciler.Sum
}

// parallelMin is the number of Services per worker from which a sync computes them on several
// goroutines: a partial sync of a few Services stays on the sync goroutine.
const parallelMin = 128

// computeChunk is how many Services a worker takes at a time.
const computeChunk = 32

// computation is one sync's computing of the desired state of its planned Services, in two
// parts: prepare, on the sync goroutine and in name order, does everything that reads or
// writes the proxier's state (owners, group IDs, the Service's slices); run then does the pure
// part (endpoint merging, pipeline.ServicePort, the flows' keys and digests), spread over up to
// GOMAXPROCS goroutines when there are many Services. Each Service's result depends only on
// its own prepared inputs, so the plan is the same whatever the spread.
type computation struct {
	p      *Proxier
	node   pipeline.NodeConfig
	served model.Families
	names  []types.NamespacedName
	jobs   []svcJob
}

// svcJob is one Service of a computation.
type svcJob struct {
	nn     types.NamespacedName
	slices []*model.EndpointSlice
	want   []desired // nil: the Service is gone, skipped or has no port served
	// issues are the addresses the Service asked for and does not get (filterPorts).
	issues []addrIssue
}

// newComputation starts a sync's computation on node, the sync's node snapshot.
func (p *Proxier) newComputation(node pipeline.NodeConfig, capacity int) *computation {
	return &computation{p: p, node: node, served: p.families(),
		names: make([]types.NamespacedName, 0, capacity), jobs: make([]svcJob, 0, capacity)}
}

// prepare adds nn to the computation: its owners and their group IDs (recorded in ownerMeta) and
// the Service's EndpointSlices. Call it on the sync goroutine, in name order (group IDs are
// allocated in that order).
func (c *computation) prepare(nn types.NamespacedName) {
	p := c.p
	if p.onCompute != nil {
		p.onCompute(nn)
	}
	c.names = append(c.names, nn)
	j := svcJob{nn: nn}
	if svc := p.service(nn); svc != nil && !p.budget.isRefused(nn) {
		if skip, _ := model.ShouldSkipService(svc, p.opts.ServiceProxyName, p.opts.Skip); !skip {
			ports := model.ServicePortsFromService(svc, model.ConvertOptions{
				ProxyLoadBalancerIPs: p.opts.ProxyLoadBalancerIPs, Served: c.served})
			// Refused addresses and tuples another Service owns are left out before any flow is
			// built: the Service gets no flow of any variant for them.
			j.issues = filterPorts(nn, ports, p.addrPolicy(), p.claims)
			j.want = c.owners(nn, svc.CreationTimestamp.Time, ports)
			if len(j.want) > 0 {
				j.slices = p.track.Endpoints.SlicesFor(nn)
				p.groups.allocSubGroups(j.want, j.slices)
			}
		}
	}
	c.jobs = append(c.jobs, j)
}

// run computes every prepared Service's flows.
func (c *computation) run() {
	limit := c.p.computeWorkers
	if limit <= 0 {
		limit = runtime.GOMAXPROCS(0)
	}
	workers := min(limit, len(c.jobs)/parallelMin)
	if workers < 2 {
		for i := range c.jobs {
			c.fill(&c.jobs[i])
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				from := int(next.Add(computeChunk)) - computeChunk
				if from >= len(c.jobs) {
					return
				}
				for i := from; i < min(from+computeChunk, len(c.jobs)); i++ {
					c.fill(&c.jobs[i])
				}
			}
		})
	}
	wg.Wait()
}

// fill computes j's flows from what prepare took. It reads only j, the computation's node
// snapshot, the options and the state's digest seeds (fixed for its life), and writes only j.
func (c *computation) fill(j *svcJob) {
	if len(j.want) == 0 {
		return
	}
	for i := range j.want {
		d := &j.want[i]
		// Both families of a port share its endpoints (model.EndpointsForService per port,
		// without its map).
		if k := slices.IndexFunc(j.want[:i], func(o desired) bool { return o.port.Name == d.port.Name }); k >= 0 {
			d.endpoints = j.want[k].endpoints
		} else {
			d.endpoints = model.EndpointsForServicePort(j.slices, d.port.Name, c.p.opts.NodeName, c.served)
		}
		// The first port of each family carries the Service's flows for its other ports.
		first := !slices.ContainsFunc(j.want[:i], func(o desired) bool { return o.ipv6 == d.ipv6 })
		d.flows = pipeline.ServicePort(c.node, pipeline.ServicePortInput{Port: d.port, Endpoints: d.endpoints,
			IPv6: d.ipv6, GroupID: d.clusterGID, LocalGroupID: d.localGID,
			SubGroupIDs: d.subGIDs, LocalSubGroupIDs: d.localSubGIDs, RejectOtherPorts: first})
		d.stage(c.p.bridgeState)
	}
}

// owners returns nn's owners, one per port and family it serves, with their group IDs.
func (c *computation) owners(nn types.NamespacedName, created time.Time, ports []model.ServicePort) []desired {
	p := c.p
	var out []desired
	for _, sp := range ports {
		for _, ipv6 := range [...]bool{false, true} {
			if !hasFamily(sp.ClusterIPs, ipv6) {
				continue
			}
			o := ownerOf(sp.Name, ipv6)
			info := p.ownerMeta[o]
			info.name, info.created = nn, created
			if info.gid == 0 {
				info.gid = p.groups.alloc()
			}
			d := desired{owner: o, clusterGID: info.gid, port: sp, ipv6: ipv6}
			if sp.InternalPolicyLocal || sp.ExternalPolicyLocal {
				if info.localGID == 0 {
					info.localGID = p.groups.alloc()
				}
				d.localGID = info.localGID
			}
			p.ownerMeta[o] = info
			out = append(out, d)
		}
	}
	return out
}

// stage readies d's flows for the plan: all, and the keys and digests of its flows.
func (d *desired) stage(st *reconciler.Reconciler) {
	d.all = d.flows.Flows
	if len(d.flows.EndpointFlows) > 0 {
		nf := len(d.flows.Flows)
		all := make([]of.Flow, 0, nf+len(d.flows.EndpointFlows))
		all = append(append(all, d.flows.Flows...), d.flows.EndpointFlows...)
		d.flows.EndpointFlows = all[nf:]
		if nf > 0 {
			d.flows.Flows = all[:nf:nf]
		}
		d.all = all
	}
	d.keys, d.sums = st.KeysOf(d.all)
}
