package agent

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/record"

	"github.com/antrea-proxy/antrea-proxy/pkg/cni/server"
)

func TestNodeEventsOfCNIState(t *testing.T) {
	rec := record.NewFakeRecorder(5)
	e := &nodeEvents{recorder: rec}
	e.Quarantined(server.Quarantined{Kind: server.KindPodRecord, File: "/s/pods/a.json", MovedTo: "/s/quarantine/t-pod-record-a.json", Reason: "undecodable"})
	e.Quarantined(server.Quarantined{Kind: server.KindSpooledDel, File: "/spool/b.json", Reason: "unreadable"})
	e.Quarantined(server.Quarantined{Kind: server.KindIPAM, File: "/s/ipam/10.0.0.9", Reason: "unreadable", LeftInPlace: "busy"})
	e.StateUnsaved(errors.New("the disk holding /s is full"))
	require.Equal(t, "Warning CNIStateQuarantined unusable CNI pod-record /s/pods/a.json (undecodable): moved it to /s/quarantine/t-pod-record-a.json; the other pods are served", <-rec.Events)
	require.Equal(t, "Warning CNIStateQuarantined unusable CNI spooled-del /spool/b.json (unreadable): removed it (it could not be kept); the other pods are served", <-rec.Events)
	require.Equal(t, "Warning CNIStateQuarantined unusable CNI ipam-reservation /s/ipam/10.0.0.9 (unreadable): ignoring it, as it can be neither moved nor removed (busy); the other pods are served", <-rec.Events)
	require.Equal(t, "Warning CNIStateUnsaved the disk holding /s is full", <-rec.Events)
}
