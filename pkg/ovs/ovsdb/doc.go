// Package ovsdb manages the Open vSwitch configuration database (the Open_vSwitch schema) for
// antrea-proxy: it creates the bridges the proxy programs with OpenFlow, attaches internal,
// system and patch ports to them and learns their OpenFlow port numbers, keeps small bits of
// proxy state (such as the flow "round number") in a bridge's external_ids, and sets conntrack
// zone timeout policies (EnsureZoneTimeouts; those tables are read straight from the server,
// not from the cache).
//
// Client talks OVSDB through github.com/ovn-org/libovsdb using the models generated into the
// vswitchd subpackage. It monitors the Open_vSwitch, Bridge, Port and Interface tables, so reads
// are served from a local cache, and every change it writes is followed, like ovs-vsctl does, by
// a wait until ovs-vswitchd has applied it (Open_vSwitch.cur_cfg catches up with next_cfg). That
// is how EnsurePort can return the OpenFlow port number, or the interface error, that
// ovs-vswitchd reported for the port.
//
// The client reconnects on its own when ovsdb-server restarts and re-establishes its monitor;
// calls made while the connection is down wait for it to come back, bounded by their context.
package ovsdb
