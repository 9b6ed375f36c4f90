// Command echoserver is the process the e2e sandbox's kubelet stand-in runs in every pod. It
// answers on TCP and UDP (-port) and on HTTP (-http-port) with one line,
//
//	<name> <client-ip:port>
//
// the pod's name and the client address it saw, so a test learns which backend answered and
// from which source the connection arrived (the client pod, a node, or the external load
// balancer). A UDP datagram "seq <n>" is answered "<name> <client-ip:port> <n>", so that a
// client sending a stream of datagrams learns which ones were answered. It prints
// "listening <addr>" once every socket is open.
package main

import (
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

func main() {
	name := flag.String("name", "echo", "name put in every reply (the pod name)")
	port := flag.Int("port", 8080, "TCP and UDP port")
	httpPort := flag.Int("http-port", 8081, "HTTP port; 0 disables HTTP")
	listen := flag.String("listen", "0.0.0.0", "address to listen on")
	flag.Parse()
	// serve returns only when it fails.
	err := serve(*name, *listen, *port, *httpPort)
	fmt.Fprintf(os.Stderr, "echoserver: %v\n", err)
	os.Exit(1)
}

func serve(name, host string, port, httpPort int) error {
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	tl, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	uc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return err
	}
	reply := func(client string) []byte { return []byte(name + " " + client + "\n") }
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := uc.ReadFrom(buf)
			if err != nil {
				return
			}
			r := reply(from.String())
			if seq, ok := strings.CutPrefix(strings.TrimSpace(string(buf[:n])), "seq "); ok {
				r = []byte(name + " " + from.String() + " " + seq + "\n")
			}
			_, _ = uc.WriteTo(r, from)
		}
	}()
	if httpPort != 0 {
		hl, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(httpPort)))
		if err != nil {
			return err
		}
		srv := &http.Server{
			ReadHeaderTimeout: 5 * time.Second,
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/plain; charset=utf-8")
				_, _ = w.Write(reply(r.RemoteAddr))
			}),
		}
		go func() { _ = srv.Serve(hl) }()
	}
	fmt.Printf("listening %s\n", addr)
	for {
		c, err := tl.Accept()
		if err != nil {
			return err
		}
		go func(c net.Conn) {
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(5 * time.Second))
			_, _ = c.Write(reply(c.RemoteAddr().String()))
		}(c)
	}
}
