package framework

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strings"
	"time"
)

// StartDialerProber is StartProber for a client in this process's own network namespace (the
// host of the real-cluster tests): every connection is made with dialer (its LocalAddr picks the
// source address); from names the client in messages.
func StartDialerProber(from string, dialer net.Dialer, addr string, opts ProberOptions) *Prober {
	echo := func(ctx context.Context, addr string, timeout time.Duration) (EchoReply, error) {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		c, err := dialer.DialContext(ctx, "tcp", addr)
		if err != nil {
			return EchoReply{}, err
		}
		defer c.Close()
		if dl, ok := ctx.Deadline(); ok {
			_ = c.SetDeadline(dl)
		}
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil {
			return EchoReply{}, fmt.Errorf("tcp echo to %s from %s: reading the reply: %w", addr, from, err)
		}
		return ParseEchoReply(strings.TrimSpace(line))
	}
	return startProber(from, echo, addr, opts)
}
