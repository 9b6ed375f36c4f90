package apiserver

import (
	"bufio"
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/antrea-proxy/antrea-proxy/pkg/agent/apiserver/apiv1"
)

// TestEncodeServiceMapMatchesMarshalIndent: the streamed service map is byte for byte what
// json.MarshalIndent writes, for no items, an empty list and several items.
func TestEncodeServiceMapMatchesMarshalIndent(t *testing.T) {
	items := []apiv1.ServicePort{{Namespace: "default", Name: "web", PortName: "http", Port: 80, Protocol: "TCP", ClusterIPs: []string{"10.96.0.10"}, GroupID: 7, Buckets: 2},
		{Namespace: "default", Name: "dns", PortName: "dns", Port: 53, Protocol: "UDP", ClusterIPs: []string{"10.96.0.53"}}}
	for _, m := range []apiv1.ServiceMap{
		{Kind: "ServiceMap", APIVersion: apiv1.APIVersion},
		{Kind: "ServiceMap", APIVersion: apiv1.APIVersion, Items: []apiv1.ServicePort{}},
		{Kind: "ServiceMap", APIVersion: apiv1.APIVersion, Items: items[:1]},
		{Kind: "ServiceMap", APIVersion: apiv1.APIVersion, Items: items},
	} {
		want, err := json.MarshalIndent(m, "", "  ")
		require.NoError(t, err)
		var b bytes.Buffer
		w := bufio.NewWriter(&b)
		require.NoError(t, encodeServiceMap(w, m))
		require.NoError(t, w.Flush())
		require.Equal(t, string(want)+"\n", b.String())
	}
}
