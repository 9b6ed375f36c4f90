package conditions

import (
	"slices"
	"strings"
	"testing"
)

// FuzzParseFeatures checks the antrea-proxy.io/required-features parser: the features come
// out trimmed, non-empty, without commas and distinct, and FormatFeatures' rendering parses
// to the same list.
func FuzzParseFeatures(f *testing.F) {
	for _, s := range []string{"", "ipFamilies", " ports , sessionAffinity,ports", ",,", "loadBalancerIP,externalTrafficPolicy,unknown"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		fs := ParseFeatures(s)
		for i, x := range fs {
			if x == "" || strings.TrimSpace(string(x)) != string(x) || strings.Contains(string(x), ",") || slices.Contains(fs[:i], x) {
				t.Fatalf("ParseFeatures(%q) = %q: bad feature %q", s, fs, x)
			}
		}
		if again := ParseFeatures(FormatFeatures(fs)); !slices.Equal(again, fs) {
			t.Fatalf("ParseFeatures(%q) = %q, formatted and parsed %q", s, fs, again)
		}
	})
}
