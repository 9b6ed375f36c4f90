package framework

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"
)

// errPortInUse marks a component that exited because one of its randomly chosen ports was taken
// between choosing and binding; the caller retries with new ports.
var errPortInUse = errors.New("a listening port was already in use")

// process is one running component. Its stdout and stderr go to LogPath.
type process struct {
	Name    string
	LogPath string
	// Grace is how long Stop waits after SIGTERM before SIGKILL.
	Grace time.Duration

	cmd     *exec.Cmd
	logFile *os.File
	exited  chan struct{}
	waitErr error
}

// startProcess runs path with args, logging to logPath. The process gets its own process group (so
// Stop also reaches anything it forks) and is killed by the kernel if the test binary dies before
// its cleanups run (for example on a test timeout or ^C).
func startProcess(name, logPath, path string, args ...string) (*process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening the log of %s: %w", name, err)
	}
	fmt.Fprintf(logFile, "==== %s %s: %s %q\n", time.Now().Format(time.RFC3339), name, path, args)
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("starting %s (%s): %w", name, path, err)
	}
	p := &process{Name: name, LogPath: logPath, Grace: 5 * time.Second, cmd: cmd, logFile: logFile, exited: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// Exited is closed when the process has exited.
func (p *process) Exited() <-chan struct{} { return p.exited }

// ExitError describes how the process ended; call it only after Exited is closed.
func (p *process) ExitError() error {
	err := fmt.Errorf("%s exited: %v", p.Name, p.waitErr)
	if p.waitErr == nil {
		err = fmt.Errorf("%s exited with status 0", p.Name)
	}
	if bytes.Contains(p.logTail(64<<10), []byte("address already in use")) {
		return fmt.Errorf("%w: %w", errPortInUse, err)
	}
	return err
}

// Stop sends SIGTERM to the process group, then SIGKILL after Grace, and waits for the exit. It is
// safe to call more than once.
func (p *process) Stop() {
	select {
	case <-p.exited:
	default:
		pgid := -p.cmd.Process.Pid
		_ = syscall.Kill(pgid, syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(p.Grace):
			_ = syscall.Kill(pgid, syscall.SIGKILL)
			<-p.exited
		}
		// Reap anything the component forked that outlived it.
		_ = syscall.Kill(pgid, syscall.SIGKILL)
	}
	_ = p.logFile.Close()
}

// Kill sends SIGKILL to the process group at once, without SIGTERM or grace period (as an OOM
// kill or a crash would end it), and waits for the exit. It is safe to call more than once.
func (p *process) Kill() {
	select {
	case <-p.exited:
	default:
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.exited
	}
	_ = p.logFile.Close()
}

// logTail returns up to the last n bytes of the log.
func (p *process) logTail(n int64) []byte {
	f, err := os.Open(p.LogPath)
	if err != nil {
		return []byte(fmt.Sprintf("(cannot read %s: %v)", p.LogPath, err))
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil
	}
	off := st.Size() - n
	if off < 0 {
		off = 0
	}
	buf := make([]byte, st.Size()-off)
	if _, err := f.ReadAt(buf, off); err != nil {
		return []byte(fmt.Sprintf("(cannot read %s: %v)", p.LogPath, err))
	}
	if off > 0 {
		if i := bytes.IndexByte(buf, '\n'); i >= 0 {
			buf = buf[i+1:]
		}
	}
	return buf
}

// freePorts returns n distinct TCP ports that are free on 127.0.0.1 right now. Another process can
// still take one before the component binds it: components that fail that way are restarted on new
// ports (see errPortInUse).
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}()
	for len(ports) < n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free port on 127.0.0.1: %w", err)
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func hostPort(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }
