package ovsdb

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
)

func TestBridgeConfigNormalize(t *testing.T) {
	tests := []struct {
		name    string
		in      BridgeConfig
		want    BridgeConfig
		wantErr string
	}{
		{
			name: "defaults",
			in:   BridgeConfig{Name: "br-int"},
			want: BridgeConfig{Name: "br-int", DatapathType: "system", Protocols: []string{"OpenFlow10", "OpenFlow13", "OpenFlow15"}, FailMode: "secure"},
		},
		{
			name: "explicit values are sorted and deduplicated",
			in:   BridgeConfig{Name: "br0", DatapathType: "netdev", Protocols: []string{"OpenFlow15", "OpenFlow13", "OpenFlow15"}, FailMode: "standalone"},
			want: BridgeConfig{Name: "br0", DatapathType: "netdev", Protocols: []string{"OpenFlow13", "OpenFlow15"}, FailMode: "standalone"},
		},
		{name: "no OpenFlow15", in: BridgeConfig{Name: "br0", Protocols: []string{"OpenFlow13"}}, wantErr: "do not include OpenFlow15"},
		{name: "unknown protocol", in: BridgeConfig{Name: "br0", Protocols: []string{"OpenFlow15", "OpenFlow16"}}, wantErr: `unknown OpenFlow protocol "OpenFlow16"`},
		{name: "bad datapath", in: BridgeConfig{Name: "br0", DatapathType: "dpdk"}, wantErr: `unsupported datapath type "dpdk"`},
		{name: "bad fail mode", in: BridgeConfig{Name: "br0", FailMode: "open"}, wantErr: `unsupported fail mode "open"`},
		{name: "empty name", in: BridgeConfig{}, wantErr: "name is empty"},
		{name: "long name", in: BridgeConfig{Name: "br-0123456789abc"}, wantErr: "longer than 15"},
		{name: "slash in name", in: BridgeConfig{Name: "br/0"}, wantErr: "not allowed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.in.normalize()
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("normalize() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBridgeConfigNormalizeDoesNotAliasInput(t *testing.T) {
	protocols := []string{"OpenFlow15", "OpenFlow10"}
	_, err := BridgeConfig{Name: "br0", Protocols: protocols}.normalize()
	require.NoError(t, err)
	require.Equal(t, []string{"OpenFlow15", "OpenFlow10"}, protocols)
}

func TestPortConfigNormalize(t *testing.T) {
	tests := []struct {
		name    string
		in      PortConfig
		want    PortConfig
		wantErr string
	}{
		{name: "system", in: PortConfig{Name: "veth1", Type: "system"}, want: PortConfig{Name: "veth1", Type: PortTypeSystem}},
		{name: "internal", in: PortConfig{Name: "gw0", Type: PortTypeInternal, RequestedOFPort: 2}, want: PortConfig{Name: "gw0", Type: PortTypeInternal, RequestedOFPort: 2}},
		{name: "patch", in: PortConfig{Name: "p-a", Type: PortTypePatch, PeerName: "p-b"}, want: PortConfig{Name: "p-a", Type: PortTypePatch, PeerName: "p-b"}},
		{name: "patch without peer", in: PortConfig{Name: "p-a", Type: PortTypePatch}, wantErr: "needs a peer"},
		{name: "peer on internal", in: PortConfig{Name: "gw0", Type: PortTypeInternal, PeerName: "x"}, wantErr: `peer name "x" given`},
		{name: "unknown type", in: PortConfig{Name: "t0", Type: "vxlan"}, wantErr: `unsupported port type "vxlan"`},
		{name: "ofport too high", in: PortConfig{Name: "gw0", RequestedOFPort: 0xff00}, wantErr: "outside 1-65279"},
		{name: "negative ofport", in: PortConfig{Name: "gw0", RequestedOFPort: -1}, wantErr: "outside"},
		{name: "no name", in: PortConfig{}, wantErr: "name is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.in.normalize()
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("normalize() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPortConfigOptions(t *testing.T) {
	patch := PortConfig{Name: "p-a", Type: PortTypePatch, PeerName: "p-b"}
	require.Equal(t, map[string]string{"peer": "p-b", "x": "1"}, patch.options(map[string]string{"peer": "old", "x": "1"}))
	internal := PortConfig{Name: "gw0", Type: PortTypeInternal}
	current := map[string]string{"peer": "old", "x": "1"}
	require.Equal(t, map[string]string{"x": "1"}, internal.options(current))
	require.Equal(t, map[string]string{"peer": "old", "x": "1"}, current, "options must not modify its input")
	require.Nil(t, internal.ofportRequest())
	require.Equal(t, 7, *PortConfig{RequestedOFPort: 7}.ofportRequest())
}

func TestReconnectBackoff(t *testing.T) {
	b := newReconnectBackoff(50*time.Millisecond, 300*time.Millisecond)
	var got []time.Duration
	for i := 0; i < 5; i++ {
		got = append(got, b.NextBackOff())
	}
	want := []time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond, 300 * time.Millisecond, 300 * time.Millisecond}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("backoff sequence (-want +got):\n%s", diff)
	}
	b.Reset()
	require.Equal(t, 50*time.Millisecond, b.NextBackOff())
	b.stop()
	require.Equal(t, parked, b.NextBackOff(), "a stopped backoff parks the reconnect loop")
	require.Greater(t, parked, 100*365*24*time.Hour)
}

func TestNotifier(t *testing.T) {
	n := newNotifier()
	first := n.changed()
	select {
	case <-first:
		t.Fatal("channel closed before any change")
	default:
	}
	n.notify()
	select {
	case <-first:
	default:
		t.Fatal("channel not closed after a change")
	}
	second := n.changed()
	select {
	case <-second:
		t.Fatal("new channel already closed")
	default:
	}
}

func TestContainsAll(t *testing.T) {
	have := map[string]string{"a": "1", "b": "2"}
	require.True(t, containsAll(have, nil))
	require.True(t, containsAll(have, map[string]string{"a": "1"}))
	require.False(t, containsAll(have, map[string]string{"a": "2"}))
	require.False(t, containsAll(have, map[string]string{"c": "3"}))
	require.False(t, containsAll(nil, map[string]string{"c": "3"}))
}
