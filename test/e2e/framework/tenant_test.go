package framework

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/antrea-proxy/antrea-proxy/pkg/agent/apiserver/apiv1"
)

func TestProblemConditions(t *testing.T) {
	conflict := apiv1.ServicePort{PortName: "tcp", Protocol: "TCP", IPFamily: "IPv4",
		Problem: &apiv1.Problem{Reason: apiv1.ProblemFlowConflict, Message: "10.96.0.10:80/TCP is claimed by a/b"}}
	fine := apiv1.ServicePort{PortName: "tcp", Protocol: "TCP", IPFamily: "IPv6"}

	ok, _ := HasProblem(apiv1.ProblemFlowConflict, "AddressRefused")([]apiv1.ServicePort{conflict})
	require.True(t, ok)
	ok, why := HasProblem("AddressRefused")([]apiv1.ServicePort{conflict})
	require.False(t, ok)
	require.Contains(t, why, "shows problem FlowConflict")
	ok, why = HasProblem(apiv1.ProblemFlowConflict)([]apiv1.ServicePort{conflict, fine})
	require.False(t, ok, "every row must show the problem")
	require.Contains(t, why, "(IPv6) shows no problem")

	ok, _ = NoProblem()([]apiv1.ServicePort{fine})
	require.True(t, ok)
	ok, why = NoProblem()([]apiv1.ServicePort{fine, conflict})
	require.False(t, ok)
	require.Contains(t, why, "claimed by a/b")
}
