package ovssandbox

import (
	"strings"
	"testing"
)

func TestStartBridgeAndFlow(t *testing.T) {
	o := Start(t, Options{})
	if _, err := o.Vsctl("add-br", "brt0", "--", "set", "bridge", "brt0", "datapath_type=netdev", "protocols=OpenFlow10,OpenFlow15"); err != nil {
		t.Fatal(err)
	}
	if err := o.WaitForBridge("brt0"); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Ofctl("add-flow", "brt0", "table=0,priority=10,ip,actions=drop"); err != nil {
		t.Fatal(err)
	}
	out, err := o.Ofctl("dump-flows", "brt0")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "priority=10,ip actions=drop") {
		t.Fatalf("flow not found in dump:\n%s", out)
	}
}
