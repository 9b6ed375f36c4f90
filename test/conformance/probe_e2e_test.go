//go:build e2e

package conformance

import (
	"context"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"
)

// address is the row's destination in w.
func (w *world) address(r Row) string {
	port := int(r.Port.Port)
	var ip string
	switch {
	case r.Target == "clusterIP", r.Target == "clusterIP-other", r.Target == "clusterIP-unallocated":
		ip = r.Shape.ClusterIP.String()
	case r.Target == "lb", r.Target == "lb-other":
		ip = r.Shape.LBIP.String()
	case r.Target == "externalIP", r.Target == "externalIP-other":
		ip = r.Shape.ExternalIP.String()
	case strings.HasPrefix(r.Target, "nodePort@"):
		ip, port = w.sb.Nodes[r.TargetNode].IP.String(), int(r.Port.NodePort)
	}
	return net.JoinHostPort(ip, strconv.Itoa(port))
}

// probeOnce sends one echo and classifies what happened.
func (w *world) probeOnce(r Row) string {
	c := w.clients[r.Client]
	proto := strings.ToLower(r.Port.Protocol)
	start := time.Now()
	reply, err := c.ns.Echo(context.Background(), proto, w.address(r), w.probeTimeout)
	if err != nil {
		class := FailureClass(err)
		if class == Dropped {
			w.noteDrop(r, start)
		}
		if class == Failed {
			w.noteError(r, err)
		}
		return class
	}
	src, perr := netip.ParseAddr(reply.ClientIP())
	if perr != nil {
		return Failed
	}
	return Answer(reply.Server, w.addrs.SourceClass(src, c.ip, BackendNode(reply.Server)))
}

// probe sends n echoes (2 when the first fails: failures do not depend on a random choice)
// and returns what they saw.
func (w *world) probe(r Row, n int) Outcome {
	first := w.probeOnce(r)
	toks := []string{first}
	if _, _, ok := splitAnswer(first); !ok {
		n = 2
	}
	for i := 1; i < n; i++ {
		toks = append(toks, w.probeOnce(r))
	}
	return NewOutcome(toks...)
}

// probeAll probes every row in both worlds, workers at a time, n echoes each; the results are
// indexed like rows.
func probeAll(worlds [2]*world, rows []Row, idx []int, n, workers int) [2][]Outcome {
	var out [2][]Outcome
	out[0], out[1] = make([]Outcome, len(rows)), make([]Outcome, len(rows))
	type job struct{ world, row int }
	jobs := make(chan job)
	var wg sync.WaitGroup
	for i := 0; i < workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				out[j.world][j.row] = worlds[j.world].probe(rows[j.row], n)
			}
		}()
	}
	for _, i := range idx {
		jobs <- job{0, i}
		jobs <- job{1, i}
	}
	close(jobs)
	wg.Wait()
	return out
}

// noteError keeps the first unclassified error of a row, for the report.
func (w *world) noteError(r Row, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.errs[r.Key()]; !ok {
		w.errs[r.Key()] = err.Error()
	}
}

// noteDrop records when a probe of the row that got no answer started, for the report.
func (w *world) noteDrop(r Row, start time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.drops[r.Key()] = append(w.drops[r.Key()], start)
}
