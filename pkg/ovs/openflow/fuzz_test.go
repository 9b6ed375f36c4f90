package openflow_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
)

// Seeds beyond the unit tests' dumps: lines others install (foreign flows), truncated and
// nested actions, odd numbers.
var flowDumpSeeds = []string{
	"OFPST_FLOW reply (OF1.5) (xid=0x2):\n cookie=0x10, table=1, priority=7,reg1=0/0x1 actions=drop\n",
	" priority=50,ip actions=dec_ttl,goto_table:1\n priority=52,ip,nw_src=192.0.2.2 actions=meter:1,output:1\n",
	" priority=51,ip,nw_src=192.0.2.1 actions=note:01.02.03.00.00.00,output:1\n",
	" table=3, priority=5,ip actions=ct(commit,zone=65521,nat(src=10.0.0.254)),controller\n",
	" table=2, priority=1,ip actions=ct(commit,table=6,zone=65520,nat(dst=[fd00::1]:8080),exec(set_field:0x1/0x1->ct_mark))\n",
	" priority=1 actions=learn(table=9,idle_timeout=30,NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[],load:0x1->NXM_NX_REG0[0..3],output:NXM_OF_IN_PORT[])\n",
	" priority=1,ipv6,ipv6_dst=fd00::/64 actions=move:NXM_NX_REG0[0..15]->NXM_NX_REG1[16..31],load:0xffff->NXM_NX_REG2[]\n",
	" priority=1,ct_state=+trk+new,ct_label=0x1/0x1,ct_mark=0x2 actions=set_field:aa:bb:cc:dd:ee:ff->eth_dst,resubmit(,4)\n",
	" priority=65535,tcp,tp_dst=0xffff actions=ct(table=1,zone=1,nat(src=10.0.0.1-10.0.0.9:1-65535,random))\n",
	" priority=1 actions=controller(reason=no_match,max_len=128,userdata=01.02\n",
	" priority=1 actions=((((\n",
	"priority=99999999999999999999 actions=drop",
	" cookie=0xffffffffffffffff, table=255, priority=0 actions=group:4294967295\n",
}

var groupDumpSeeds = []string{
	"OFPST_GROUP_DESC reply (OF1.5) (xid=0x2):\n group_id=6,type=all,bucket=bucket_id:0,actions=output:1\n",
	" group_id=2,type=select,selection_method=hash,fields(ip_src,ip_dst,tcp_src,tcp_dst),bucket=bucket_id:0,weight:100,actions=set_field:0xa000001->reg3,resubmit(,5),bucket=bucket_id:1,weight:50,actions=ct(commit,table=6,zone=65520,nat(dst=10.0.0.2:8080),exec(set_field:0x1/0x1->ct_mark))\n",
	" group_id=3,type=select,selection_method=hash,fields(ipv6_src,ipv6_dst)\n",
	" group_id=8,type=select,selection_method=hash,selection_method_param=7,fields(eth_src,ip_src=255.255.0.0,tcp_dst),bucket=bucket_id:0,actions=output:1\n",
	" group_id=1,type=select,bucket=bucket_id:0,watch_port:3,actions=drop\n",
	" group_id=1,type=select,bucket=bucket_id:0,weight:\n",
	" group_id=,type=\n",
	"group_id=4294967296,type=select",
}

var aggregateSeeds = []string{
	"OFPST_AGGREGATE reply (OF1.5) (xid=0x2): packet_count=0 byte_count=0 flow_count=1\n",
	"NXST_AGGREGATE reply (xid=0x4): packet_count=1 byte_count=2 flow_count=3\n",
	"OFPST_AGGREGATE reply (OF1.5) (xid=0x2):\n packet_count=0 byte_count=0 flow_count=7\n",
	"OFPST_AGGREGATE reply (OF1.5) (xid=0x2): flow_count=-1",
	"flow_count=18446744073709551616",
	"",
}

// FuzzParseFlowDump: neither parser panics, and when the strict parser accepts a dump the
// lenient one returns the same flows and skips nothing; every flow returned renders.
func FuzzParseFlowDump(f *testing.F) {
	for _, c := range parseFlowCases {
		f.Add(c.line)
	}
	for _, s := range flowDumpSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, dump string) {
		strict, err := of.ParseFlowDump(dump)
		lenient, skipped := of.ParseFlowDumpLenient(dump)
		if skipped.Count < len(skipped.Errors) || len(skipped.Errors) > of.MaxSkippedErrors {
			t.Fatalf("skipped count %d, %d errors", skipped.Count, len(skipped.Errors))
		}
		if err != nil {
			if skipped.Count == 0 {
				t.Fatalf("strict parse failed (%v) but the lenient one skipped nothing", err)
			}
			return
		}
		if skipped.Count != 0 {
			t.Fatalf("strict parse succeeded but the lenient one skipped %d lines: %v", skipped.Count, skipped.Errors[0])
		}
		if d := cmp.Diff(strict, lenient, cmpModel()); d != "" {
			t.Fatalf("strict and lenient parses differ:\n%s", d)
		}
		for i := range strict {
			_ = of.FormatFlow(&strict[i])
		}
	})
}

// FuzzParseGroupDump: the group dump parser never panics, and what it returns renders.
func FuzzParseGroupDump(f *testing.F) {
	for _, s := range groupDumpSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, dump string) {
		groups, err := of.ParseGroupDump(dump)
		if err != nil {
			if !strings.Contains(err.Error(), "parsing OpenFlow dump") {
				t.Fatalf("error without context: %v", err)
			}
			return
		}
		for i := range groups {
			_ = of.FormatGroup(&groups[i])
		}
	})
}

// FuzzParseAggregateReply: the dump-aggregate parser never panics, and a successful parse saw
// a flow_count.
func FuzzParseAggregateReply(f *testing.F) {
	for _, s := range aggregateSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, out string) {
		st, err := of.ParseAggregateReply(out)
		if err == nil && !strings.Contains(out, "flow_count=") {
			t.Fatalf("parsed %+v from a reply without flow_count: %q", st, out)
		}
	})
}
