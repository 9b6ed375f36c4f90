// Command echoserver is the test helper that ovssandbox runs inside network namespaces.
//
// As a server (default) it listens on TCP and UDP and answers every connection or datagram with
// "<name> <client-ip:port>\n", so a test learns which backend answered and which source address
// the backend saw. With -client it connects once to -addr and prints the reply.
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

func main() {
	name := flag.String("name", "echo", "name the server puts in its replies")
	port := flag.Int("port", 8080, "TCP and UDP port to listen on")
	listen := flag.String("listen", "0.0.0.0", "address to listen on")
	client := flag.Bool("client", false, "act as a client: connect to -addr and print the reply")
	proto := flag.String("proto", "tcp", "client protocol: tcp or udp")
	addr := flag.String("addr", "", "client: server address host:port")
	timeout := flag.Duration("timeout", 3*time.Second, "client: overall deadline")
	flag.Parse()

	if *client {
		reply, err := dial(*proto, *addr, *timeout)
		if err != nil {
			fmt.Fprintf(os.Stderr, "echoserver client: %v\n", err)
			os.Exit(1)
		}
		fmt.Println(reply)
		return
	}
	// serve returns only when it fails.
	err := serve(*name, net.JoinHostPort(*listen, strconv.Itoa(*port)))
	fmt.Fprintf(os.Stderr, "echoserver: %v\n", err)
	os.Exit(1)
}

func serve(name, addr string) error {
	tl, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	uc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return err
	}
	go func() {
		buf := make([]byte, 2048)
		for {
			_, from, err := uc.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = uc.WriteTo([]byte(name+" "+from.String()+"\n"), from)
		}
	}()
	fmt.Printf("listening %s\n", addr) // the harness waits for this line
	for {
		c, err := tl.Accept()
		if err != nil {
			return err
		}
		go func(c net.Conn) {
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(5 * time.Second))
			_, _ = c.Write([]byte(name + " " + c.RemoteAddr().String() + "\n"))
		}(c)
	}
}

func dial(proto, addr string, timeout time.Duration) (string, error) {
	deadline := time.Now().Add(timeout)
	switch proto {
	case "tcp":
		c, err := net.DialTimeout("tcp", addr, timeout)
		if err != nil {
			return "", err
		}
		defer c.Close()
		_ = c.SetDeadline(deadline)
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil {
			return "", fmt.Errorf("reading reply from %s: %w", addr, err)
		}
		return strings.TrimSpace(line), nil
	case "udp":
		c, err := net.Dial("udp", addr)
		if err != nil {
			return "", err
		}
		defer c.Close()
		buf := make([]byte, 2048)
		// Datagrams may be lost (e.g. while ARP resolves): resend every 300ms until the deadline.
		for time.Now().Before(deadline) {
			if _, err := c.Write([]byte("ping\n")); err != nil {
				return "", err
			}
			_ = c.SetReadDeadline(minTime(deadline, time.Now().Add(300*time.Millisecond)))
			n, err := c.Read(buf)
			if err == nil {
				return strings.TrimSpace(string(buf[:n])), nil
			}
			var ne net.Error
			if !errors.As(err, &ne) || !ne.Timeout() {
				return "", err
			}
		}
		return "", fmt.Errorf("no UDP reply from %s within %v", addr, timeout)
	}
	return "", fmt.Errorf("unknown protocol %q", proto)
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
