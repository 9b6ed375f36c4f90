// Command l4proxy is the end-to-end suites' external load balancer: a small L4 TCP and UDP
// relay that owns Proxy-mode LB addresses and forwards every connection to a node's NodePort,
// the way a cloud load balancer in "Proxy" ipMode does. It counts what it relays and serves the
// counts as JSON on -stats, so tests can tell its connections apart from direct ones.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

type counters struct {
	TCP atomic.Int64
	UDP atomic.Int64
}

func main() {
	listen := flag.String("listen", "", "comma-separated listen addresses, e.g. 172.18.0.101:80")
	target := flag.String("to", "", "target address, e.g. 192.168.77.10:30081")
	proto := flag.String("proto", "tcp", "tcp, udp or both")
	stats := flag.String("stats", "", "address of the JSON stats endpoint (optional)")
	flag.Parse()
	if *listen == "" || *target == "" {
		fmt.Fprintln(os.Stderr, "l4proxy: -listen and -to are required")
		os.Exit(2)
	}
	var c counters
	for _, addr := range strings.Split(*listen, ",") {
		if *proto == "tcp" || *proto == "both" {
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				log.Fatalf("l4proxy: listen tcp %s: %v", addr, err)
			}
			go serveTCP(ln, *target, &c)
		}
		if *proto == "udp" || *proto == "both" {
			pc, err := net.ListenPacket("udp", addr)
			if err != nil {
				log.Fatalf("l4proxy: listen udp %s: %v", addr, err)
			}
			go serveUDP(pc, *target, &c)
		}
	}
	if *stats != "" {
		http.HandleFunc("/stats", func(w http.ResponseWriter, _ *http.Request) {
			_ = json.NewEncoder(w).Encode(map[string]int64{"tcp": c.TCP.Load(), "udp": c.UDP.Load()})
		})
		go func() { log.Fatal(http.ListenAndServe(*stats, nil)) }()
	}
	fmt.Println("ready")
	select {}
}

func serveTCP(ln net.Listener, target string, c *counters) {
	for {
		conn, err := ln.Accept()
		if err != nil {
			log.Printf("l4proxy: accept: %v", err)
			return
		}
		go func() {
			defer conn.Close()
			up, err := net.DialTimeout("tcp", target, 5*time.Second)
			if err != nil {
				log.Printf("l4proxy: dial %s: %v", target, err)
				return
			}
			defer up.Close()
			c.TCP.Add(1)
			var wg sync.WaitGroup
			wg.Add(2)
			pipe := func(dst, src net.Conn) {
				defer wg.Done()
				_, _ = io.Copy(dst, src)
				if tc, ok := dst.(*net.TCPConn); ok {
					_ = tc.CloseWrite()
				}
			}
			go pipe(up, conn)
			go pipe(conn, up)
			wg.Wait()
		}()
	}
}

// serveUDP relays each datagram through a fresh upstream socket and returns the first reply.
func serveUDP(pc net.PacketConn, target string, c *counters) {
	buf := make([]byte, 65535)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			log.Printf("l4proxy: udp read: %v", err)
			return
		}
		msg := append([]byte(nil), buf[:n]...)
		go func() {
			up, err := net.Dial("udp", target)
			if err != nil {
				return
			}
			defer up.Close()
			c.UDP.Add(1)
			_ = up.SetDeadline(time.Now().Add(3 * time.Second))
			if _, err := up.Write(msg); err != nil {
				return
			}
			reply := make([]byte, 65535)
			m, err := up.Read(reply)
			if err != nil {
				return
			}
			_, _ = pc.WriteTo(reply[:m], from)
		}()
	}
}
