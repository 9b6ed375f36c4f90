package ovsdb

import (
	"context"
	"strconv"

	"k8s.io/klog/v2"
)

// RoundKey is the bridge external_ids key under which antrea-agent keeps its flow round.
const RoundKey = "antrea-proxy-round"

// RoundStore keeps a flow round number in a bridge's external_ids, so that a restarted agent
// knows which round of flows it replaces.
type RoundStore struct {
	Client *Client
	Bridge string
}

// LoadRound returns the saved round; ok is false when none (or a malformed one) is saved.
func (r RoundStore) LoadRound(ctx context.Context) (uint16, bool, error) {
	ids, err := r.Client.BridgeExternalIDs(ctx, r.Bridge)
	if err != nil {
		return 0, false, err
	}
	s, ok := ids[RoundKey]
	if !ok {
		return 0, false, nil
	}
	n, err := strconv.ParseUint(s, 10, 16)
	if err != nil {
		klog.InfoS("Ignoring malformed flow round in bridge external_ids", "bridge", r.Bridge, "key", RoundKey, "value", s)
		return 0, false, nil
	}
	return uint16(n), true, nil
}

// SaveRound records round.
func (r RoundStore) SaveRound(ctx context.Context, round uint16) error {
	return r.Client.SetBridgeExternalIDs(ctx, r.Bridge, map[string]string{RoundKey: strconv.Itoa(int(round))})
}
