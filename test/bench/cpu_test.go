//go:build bench

package bench

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// controlPlaneComponents are the processes whose CPU the loader reports.
var controlPlaneComponents = []string{"kube-apiserver", "etcd", "kube-controller-manager"}

// cpuWatch reads the CPU time of a fixed set of processes.
type cpuWatch struct {
	pids map[string]int
}

// cpuSample is CPU seconds by component name.
type cpuSample map[string]float64

// watchControlPlane finds the sandbox's control-plane processes: those whose command is one
// of controlPlaneComponents and whose arguments name a path under dir (the control plane's
// directory, so that another sandbox's processes are not counted).
func watchControlPlane(dir string) (*cpuWatch, error) {
	w := &cpuWatch{pids: map[string]int{}}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil || len(b) == 0 {
			continue
		}
		args := bytes.Split(bytes.TrimRight(b, "\x00"), []byte{0})
		name := filepath.Base(string(args[0]))
		for _, c := range controlPlaneComponents {
			if name == c && bytes.Contains(b, []byte(dir)) {
				w.pids[c] = pid
			}
		}
	}
	for _, c := range controlPlaneComponents {
		if w.pids[c] == 0 {
			return nil, fmt.Errorf("no %s process with %s in its arguments", c, dir)
		}
	}
	return w, nil
}

// sample reads every process's utime+stime (a process that cannot be read counts 0).
func (w *cpuWatch) sample() cpuSample {
	s := cpuSample{}
	for name, pid := range w.pids {
		v, _ := cpuSeconds(pid)
		s[name] = v
	}
	return s
}

// since is s minus an earlier sample.
func (s cpuSample) since(before cpuSample) map[string]float64 {
	d := map[string]float64{}
	for k, v := range s {
		d[k] = v - before[k]
	}
	return d
}

// formatCPU is "kube-apiserver 12.3 s, etcd 4.0 s, ..." in a fixed order.
func formatCPU(m map[string]float64) string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	parts := make([]string, 0, len(names))
	for _, k := range names {
		parts = append(parts, fmt.Sprintf("%s %.1f s", k, m[k]))
	}
	return strings.Join(parts, ", ")
}
