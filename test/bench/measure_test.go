//go:build bench

package bench

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat (100 on Linux).
const clockTicks = 100

// rssMB is VmRSS of pid in MB.
func rssMB(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, err := strconv.ParseFloat(f[1], 64)
			return kb / 1024, err
		}
	}
	return 0, fmt.Errorf("pid %d: no VmRSS", pid)
}

// cpuSeconds is utime+stime of pid.
func cpuSeconds(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	// Fields after the command (which may hold spaces) start at state (field 3).
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("pid %d: malformed stat", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("pid %d: short stat", pid)
	}
	ut, err1 := strconv.ParseFloat(f[11], 64)
	st, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("pid %d: stat times: %v %v", pid, err1, err2)
	}
	return (ut + st) / clockTicks, nil
}

// contextSwitches is how many times the threads of pid were switched out, voluntarily (to wait)
// or not: the sum over /proc/<pid>/task/*/status. At rest nearly every one is a wake-up of a
// thread that had nothing to do, so their rate says how often the process wakes, at a far finer
// grain than its CPU time in clock ticks. Threads that exited are not counted.
func contextSwitches(pid int) (float64, error) {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	var n float64
	for _, task := range tasks {
		b, err := os.ReadFile(filepath.Join(dir, task.Name(), "status"))
		if err != nil {
			continue // the thread exited meanwhile
		}
		v, err := switchesOf(string(b))
		if err != nil {
			return 0, fmt.Errorf("%s/%s/status: %w", dir, task.Name(), err)
		}
		n += v
	}
	return n, nil
}

// switchesOf is voluntary_ctxt_switches + nonvoluntary_ctxt_switches of a status file.
func switchesOf(status string) (float64, error) {
	var n float64
	found := 0
	for _, line := range strings.Split(status, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || (k != "voluntary_ctxt_switches" && k != "nonvoluntary_ctxt_switches") {
			continue
		}
		x, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", k, err)
		}
		n += x
		found++
	}
	if found != 2 {
		return 0, fmt.Errorf("no context switch counts")
	}
	return n, nil
}

// histogram is one Prometheus histogram of a text exposition.
type histogram struct {
	Sum, Count float64
	// Buckets maps the upper bound to the cumulative count.
	Buckets map[float64]float64
}

// parseHistogram finds histogram name (without _bucket/_sum/_count) in a text exposition.
func parseHistogram(body []byte, name string) histogram {
	h := histogram{Buckets: map[float64]float64{}}
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, name+"_") {
			continue
		}
		// Labelled per IP family (kube-proxy): the IPv4 series only.
		if strings.Contains(line, `ip_family="IPv6"`) {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			continue
		}
		metric := strings.SplitN(f[0], "{", 2)[0]
		switch {
		case metric == name+"_sum":
			h.Sum = v
		case metric == name+"_count":
			h.Count = v
		case strings.HasPrefix(f[0], name+"_bucket{"):
			j := strings.Index(f[0], `le="`)
			if j < 0 {
				continue
			}
			le := strings.TrimSuffix(f[0][j+4:], `"}`)
			le = strings.SplitN(le, `"`, 2)[0]
			ub, err := strconv.ParseFloat(le, 64)
			if le == "+Inf" {
				ub, err = math.Inf(1), nil
			}
			if err == nil {
				h.Buckets[ub] = v
			}
		}
	}
	return h
}

// sub is h minus an earlier snapshot of the same histogram.
func (h histogram) sub(before histogram) histogram {
	d := histogram{Sum: h.Sum - before.Sum, Count: h.Count - before.Count, Buckets: map[float64]float64{}}
	for ub, v := range h.Buckets {
		d.Buckets[ub] = v - before.Buckets[ub]
	}
	return d
}

// Mean is Sum/Count, 0 when empty.
func (h histogram) Mean() float64 {
	if h.Count == 0 {
		return 0
	}
	return h.Sum / h.Count
}

// Quantile is q estimated as histogram_quantile does: linear inside the bucket holding it.
func (h histogram) Quantile(q float64) float64 {
	if h.Count == 0 {
		return 0
	}
	ubs := make([]float64, 0, len(h.Buckets))
	for ub := range h.Buckets {
		ubs = append(ubs, ub)
	}
	sort.Float64s(ubs)
	rank := q * h.Count
	lower, below := 0.0, 0.0
	for _, ub := range ubs {
		c := h.Buckets[ub]
		if c >= rank {
			if math.IsInf(ub, 1) {
				return lower
			}
			if c == below {
				return ub
			}
			return lower + (ub-lower)*(rank-below)/(c-below)
		}
		lower, below = ub, c
	}
	return lower
}

// quantile is the q-quantile of xs (nearest rank), 0 when empty.
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}
