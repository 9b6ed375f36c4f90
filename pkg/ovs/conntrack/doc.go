// Package conntrack reads and edits the connection tracker of ovs-vswitchd through ovs-appctl's
// dpctl commands: Dump lists one zone's entries (`dpctl/dump-conntrack zone=N`) and Delete
// removes exactly one entry (`dpctl/flush-conntrack zone=N <its original 5-tuple>`). The
// userspace (netdev) datapath keeps its connection tracker inside ovs-vswitchd, so neither the
// kernel's conntrack tool nor netlink can see it; ovs-appctl works for both datapaths.
package conntrack
