package ipam

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
)

func prefixes(ss ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range ss {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}

func owner(i int) Owner { return Owner{ContainerID: fmt.Sprintf("c%03d", i), IfName: "eth0"} }

func TestAllocateDualStackSkipsGatewayAndIsIdempotent(t *testing.T) {
	a, err := New(t.TempDir(), prefixes("10.10.0.0/24", "fd00:10::/64"))
	require.NoError(t, err)
	got, err := a.Allocate(owner(1))
	require.NoError(t, err)
	require.Equal(t, prefixes("10.10.0.2/24", "fd00:10::2/64"), got)
	again, err := a.Allocate(owner(1))
	require.NoError(t, err)
	require.Equal(t, got, again, "a second ADD of the same container and interface gets the same addresses")
	other, err := a.Allocate(Owner{ContainerID: "c001", IfName: "eth1"})
	require.NoError(t, err)
	require.Equal(t, prefixes("10.10.0.3/24", "fd00:10::3/64"), other, "another interface of the container is another owner")
	require.Equal(t, netip.MustParseAddr("10.10.0.1"), Gateway(netip.MustParsePrefix("10.10.0.0/24")))
}

func TestStateSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	a, err := New(dir, prefixes("10.10.0.0/24"))
	require.NoError(t, err)
	for i := 1; i <= 3; i++ {
		_, err := a.Allocate(owner(i))
		require.NoError(t, err)
	}
	require.NoError(t, a.Release(owner(2)))

	b, err := New(dir, prefixes("10.10.0.0/24")) // the restarted agent
	require.NoError(t, err)
	got, err := b.Get(owner(1))
	require.NoError(t, err)
	require.Equal(t, prefixes("10.10.0.2/24"), got)
	got, err = b.Get(owner(2))
	require.NoError(t, err)
	require.Empty(t, got, "a released address stays released")
	fresh, err := b.Allocate(owner(4))
	require.NoError(t, err)
	require.Equal(t, prefixes("10.10.0.5/24"), fresh, "allocation continues after the last address handed out, not in a released one")
	owners, err := b.Owners()
	require.NoError(t, err)
	want := map[Owner][]netip.Addr{
		owner(1): {netip.MustParseAddr("10.10.0.2")},
		owner(3): {netip.MustParseAddr("10.10.0.4")},
		owner(4): {netip.MustParseAddr("10.10.0.5")},
	}
	if diff := cmp.Diff(want, owners, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
		t.Errorf("owners after restart (-want +got):\n%s", diff)
	}
}

func TestExhaustionAndReuseAfterRelease(t *testing.T) {
	a, err := New(t.TempDir(), prefixes("10.10.0.0/29")) // .2 - .6 usable
	require.NoError(t, err)
	for i := 0; i < 5; i++ {
		_, err := a.Allocate(owner(i))
		require.NoError(t, err)
	}
	_, err = a.Allocate(owner(99))
	require.ErrorIs(t, err, ErrExhausted)
	require.NoError(t, a.Release(owner(3)))
	got, err := a.Allocate(owner(99))
	require.NoError(t, err)
	require.Equal(t, prefixes("10.10.0.5/29"), got, "the only free address is the released one")
}

func TestExhaustedFamilyReservesNothing(t *testing.T) {
	dir := t.TempDir()
	a, err := New(dir, prefixes("10.10.0.0/30", "fd00::/64")) // one IPv4 address usable
	require.NoError(t, err)
	_, err = a.Allocate(owner(1))
	require.NoError(t, err)
	_, err = a.Allocate(owner(2))
	require.ErrorIs(t, err, ErrExhausted)
	got, err := a.Get(owner(2))
	require.NoError(t, err)
	require.Empty(t, got, "the IPv6 address taken before IPv4 failed is given back")
}

func TestNoAddressHandedOutTwiceUnderConcurrency(t *testing.T) {
	dir := t.TempDir()
	a, err := New(dir, prefixes("10.10.0.0/24"))
	require.NoError(t, err)
	b, err := New(dir, prefixes("10.10.0.0/24")) // a second allocator racing on the same files
	require.NoError(t, err)
	var mu sync.Mutex
	seen := map[netip.Prefix]Owner{}
	var wg sync.WaitGroup
	for i := 0; i < 40; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			al := a
			if i%2 == 1 {
				al = b
			}
			got, err := al.Allocate(owner(i))
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if prev, dup := seen[got[0]]; dup {
				t.Errorf("%v handed out to %v and %v", got[0], prev, owner(i))
			}
			seen[got[0]] = owner(i)
		}()
	}
	wg.Wait()
	require.Len(t, seen, 40)
}

func TestCorruptOrForeignFilesKeepAddressesOutOfUse(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "10.10.0.2"), []byte("garbage"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".reserve-123"), []byte("c9\neth0\n"), 0o600))
	a, err := New(dir, prefixes("10.10.0.0/24"))
	require.NoError(t, err)
	got, err := a.Allocate(owner(1))
	require.NoError(t, err)
	require.Equal(t, prefixes("10.10.0.3/24"), got)
}

func TestNewRejectsBadSubnets(t *testing.T) {
	for _, tc := range []struct {
		name    string
		subnets []netip.Prefix
	}{
		{"none", nil},
		{"two IPv4", prefixes("10.0.0.0/24", "10.1.0.0/24")},
		{"too small", prefixes("10.0.0.0/31")},
		{"invalid", []netip.Prefix{{}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(t.TempDir(), tc.subnets)
			require.Error(t, err)
		})
	}
	a, err := New(t.TempDir(), prefixes("10.0.0.0/24"))
	require.NoError(t, err)
	_, err = a.Allocate(Owner{ContainerID: "../x", IfName: "eth0"})
	require.Error(t, err)
	require.False(t, errors.Is(err, ErrExhausted))
}
