//go:build bench

package bench

import (
	"bytes"
	"fmt"
	"net/netip"
	"regexp"

	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// A netlink read of one nftables chain: the kube-proxy probe of the one-endpoint changes. It
// asks the kernel for the rules of one chain (NFT_MSG_GETRULE, filtered by table and chain) and
// for the elements of the anonymous maps those rules use (NFT_MSG_GETSETELEM of one set), and
// looks for the new endpoint in the replies: kube-proxy v1.37's Service chain DNATs through
// `numgen random mod N map { 0 : <ip> . <port>, … }`, whose elements hold the address and port
// in binary; a jump to an endpoint chain ("…__<ip>/<port>", earlier releases) is found by name. Unlike `nft list chain`, which
// loads every chain and set of the table into nft's cache first, and unlike `nft monitor`,
// which does the same when it starts, its cost does not grow with the rest of the ruleset
// (the kernel finds the chain by name; only the set lookup walks the table's set list).

// nf_tables netlink constants (linux/netfilter/nfnetlink.h, linux/netfilter/nf_tables.h).
const (
	nfnlSubsysNFTables    = 10
	nftMsgGetRule         = 7
	nftMsgGetSetElem      = 13
	nftaRuleTable         = 1
	nftaRuleChain         = 2
	nftaSetElemListTable  = 1
	nftaSetElemListSet    = 2
	nftablesFamilyIPv4    = unix.AF_INET
	nftablesNetlinkSocket = unix.NETLINK_NETFILTER
)

// anonymousMapRE matches the name nft gives an anonymous map ("map { … }" of a rule).
var anonymousMapRE = regexp.MustCompile(`__map[0-9]+`)

// nftDump is one nf_tables dump request of msgType with string attributes (type → value), in
// the calling thread's network namespace; it returns the reply messages' payloads.
func nftDump(msgType int, attrs [][2]any) ([][]byte, error) {
	req := nl.NewNetlinkRequest(nfnlSubsysNFTables<<8|msgType, unix.NLM_F_DUMP)
	req.AddData(&nl.Nfgenmsg{NfgenFamily: nftablesFamilyIPv4})
	for _, a := range attrs {
		req.AddData(nl.NewRtAttr(a[0].(int), nl.ZeroTerminated(a[1].(string))))
	}
	return req.Execute(nftablesNetlinkSocket, 0)
}

// chainHolds reports whether a rule of chain in the IPv4 table sends traffic to ip:port: an
// anonymous map of the rule maps to ip . port (binary data: 4 address bytes, then the port in
// network order), or a rule or map jumps to a chain whose name holds "__<ip>/". It runs in the
// calling thread's network namespace.
func chainHolds(table, chain string, ip netip.Addr, port uint16) (bool, error) {
	rules, err := nftDump(nftMsgGetRule, [][2]any{{nftaRuleTable, table}, {nftaRuleChain, chain}})
	if err != nil {
		return false, fmt.Errorf("reading the rules of %s %s: %w", table, chain, err)
	}
	a := ip.As4()
	data := append(a[:], byte(port>>8), byte(port))
	name := []byte("__" + ip.String() + "/")
	holds := func(msg []byte) bool { return bytes.Contains(msg, data) || bytes.Contains(msg, name) }
	sets := map[string]bool{}
	for _, r := range rules {
		if bytes.Contains(r, name) {
			return true, nil
		}
		for _, m := range anonymousMapRE.FindAll(r, -1) {
			sets[string(m)] = true
		}
	}
	for set := range sets {
		elems, err := nftDump(nftMsgGetSetElem, [][2]any{{nftaSetElemListTable, table}, {nftaSetElemListSet, set}})
		if err != nil {
			return false, fmt.Errorf("reading the elements of %s %s: %w", table, set, err)
		}
		for _, e := range elems {
			if holds(e) {
				return true, nil
			}
		}
	}
	return false, nil
}
