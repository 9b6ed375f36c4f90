package framework

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// Echo ports of the e2e echo server (test/e2e/echoserver) inside every pod.
const (
	EchoPort     = 8080 // TCP and UDP
	EchoHTTPPort = 8081
)

// EchoReply is what an echo server answered: its pod name and the client address it saw.
type EchoReply struct {
	Server string
	// Client is "ip:port" as the server saw it.
	Client string
}

// ClientIP is the IP part of Client.
func (r EchoReply) ClientIP() string {
	host, _, err := net.SplitHostPort(r.Client)
	if err != nil {
		return r.Client
	}
	return host
}

func (r EchoReply) String() string { return r.Server + " (saw " + r.Client + ")" }

// ParseEchoReply parses "<name> <client-ip:port>".
func ParseEchoReply(line string) (EchoReply, error) {
	f := strings.Fields(line)
	if len(f) != 2 {
		return EchoReply{}, fmt.Errorf("malformed echo reply %q", line)
	}
	return EchoReply{Server: f[0], Client: f[1]}, nil
}

// Echo sends one request from inside ns to an echo server at addr over proto ("tcp", "udp" or
// "http") and returns the reply. It fails after timeout; UDP datagrams are resent every 300ms
// until then.
func (n *NetNS) Echo(ctx context.Context, proto, addr string, timeout time.Duration) (EchoReply, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var line string
	var err error
	switch proto {
	case "tcp":
		line, err = n.echoTCP(ctx, addr)
	case "udp":
		line, err = n.echoUDP(ctx, addr)
	case "http":
		line, err = n.echoHTTP(ctx, addr)
	default:
		return EchoReply{}, fmt.Errorf("unknown echo protocol %q", proto)
	}
	if err != nil {
		return EchoReply{}, fmt.Errorf("%s echo to %s from netns %s: %w", proto, addr, n.Name, err)
	}
	return ParseEchoReply(line)
}

func (n *NetNS) echoTCP(ctx context.Context, addr string) (string, error) {
	c, err := n.Dial(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return "", fmt.Errorf("reading the reply: %w", err)
	}
	return strings.TrimSpace(line), nil
}

func (n *NetNS) echoUDP(ctx context.Context, addr string) (string, error) {
	c, err := n.Dial(ctx, "udp", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	buf := make([]byte, 2048)
	for {
		if _, err := c.Write([]byte("ping\n")); err != nil {
			return "", err
		}
		_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		m, err := c.Read(buf)
		if err == nil {
			return strings.TrimSpace(string(buf[:m])), nil
		}
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			return "", err
		}
		if ctx.Err() != nil {
			return "", fmt.Errorf("no UDP reply: %w", ctx.Err())
		}
	}
}

func (n *NetNS) echoHTTP(ctx context.Context, addr string) (string, error) {
	client := &http.Client{Transport: &http.Transport{DialContext: n.Dial, DisableKeepAlives: true}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/", nil)
	if err != nil {
		return "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("HTTP %d: %s", resp.StatusCode, body)
	}
	return strings.TrimSpace(string(body)), nil
}

// HTTPGet fetches url from inside ns and returns the body of a 200 answer.
func (n *NetNS) HTTPGet(ctx context.Context, url string) ([]byte, error) {
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: n.Dial, DisableKeepAlives: true}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s from netns %s: %w", url, n.Name, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s from netns %s: HTTP %d: %s", url, n.Name, resp.StatusCode, body)
	}
	return body, nil
}
