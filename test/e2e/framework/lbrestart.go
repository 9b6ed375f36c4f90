package framework

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"time"
)

// StopLBController stops antrea-controller (SIGTERM, as a rolling update would) and waits for
// it to exit. RestartLBController starts it again.
func (s *Sandbox) StopLBController(c *LBController) { c.proc.Stop() }

// RestartLBController starts antrea-controller (again, after StopLBController) with c's
// configuration, serving /healthz, /readyz and /metrics on a free loopback port. It returns
// that address (host:port, also c.Addr) once the controller answers HTTP there; the Services it
// finds are whatever the API holds at that moment.
func (s *Sandbox) RestartLBController(c *LBController) (string, error) {
	bin := filepath.Join(s.Bins.Dir, "antrea-controller")
	ports, err := freePorts(1)
	if err != nil {
		return "", err
	}
	addr := hostPort(ports[0])
	p, err := startProcess("antrea-controller", filepath.Join(s.CP.LogDir, "antrea-controller.log"), bin,
		"--config", c.ConfPath, "--leader-elect=false", "--v=2", "--bind-address", addr)
	if err != nil {
		return "", err
	}
	s.mu.Lock()
	s.procs = append(s.procs, p)
	s.mu.Unlock()
	c.proc, c.Addr = p, addr
	err = waitReady(p, 30*time.Second, "antrea-controller to serve HTTP on "+addr, func(ctx context.Context) (bool, string) {
		code, _, err := HTTPGet(ctx, addr, "/healthz")
		if err != nil {
			return false, err.Error()
		}
		return code == http.StatusOK, fmt.Sprintf("/healthz: %d", code)
	})
	if err != nil {
		return "", err
	}
	return addr, nil
}

// HTTPGet fetches http://addr/path and returns the status code and body.
func HTTPGet(ctx context.Context, addr, path string) (int, string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}
