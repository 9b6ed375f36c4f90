package config

import "testing"

func TestNormalizeAPIServer(t *testing.T) {
	good := map[string]string{
		"10.0.0.1":                "https://10.0.0.1",
		"10.0.0.1:6443":           "https://10.0.0.1:6443",
		"api.example.com:443":     "https://api.example.com:443",
		"[fd00::1]:6443":          "https://[fd00::1]:6443",
		"https://10.0.0.1:6443/":  "https://10.0.0.1:6443",
		"http://127.0.0.1:8080":   "http://127.0.0.1:8080",
		"https://[fd00::1]:6443":  "https://[fd00::1]:6443",
		"https://api.example.com": "https://api.example.com",
	}
	for in, want := range good {
		got, err := normalizeAPIServer(in)
		if err != nil || got != want {
			t.Errorf("normalizeAPIServer(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{
		"", "ftp://10.0.0.1", "https://", "https://10.0.0.1:6443/api", "https://10.0.0.1?x=1",
		"10.0.0.1:http", "10.0.0.1:0", "10.0.0.1:70000", "https://user:pw@10.0.0.1", "https://10.0.0.1#f",
		"fd00::1:6443",
	} {
		if got, err := normalizeAPIServer(bad); err == nil {
			t.Errorf("normalizeAPIServer(%q) = %q, want an error", bad, got)
		}
	}
}
