package config

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// validateAPIServerOverride checks kubeAPIServerOverride (the same field in both configs).
func validateAPIServerOverride(v string) error {
	if v == "" {
		return nil
	}
	if _, err := normalizeAPIServer(v); err != nil {
		return fieldErr("kubeAPIServerOverride", "%v", err)
	}
	return nil
}

// NormalizeAPIServer turns an apiserver override into the URL the client uses: "host",
// "host:port" and "[v6]:port" mean https; a URL must be http or https with a host and no path,
// query or fragment.
func normalizeAPIServer(s string) (string, error) {
	raw := s
	if !strings.Contains(s, "://") {
		raw = "https://" + s
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("%q is not a host, host:port or URL: %w", s, err)
	}
	switch {
	case u.Scheme != "https" && u.Scheme != "http":
		return "", fmt.Errorf("%q: scheme must be https or http", s)
	case u.Hostname() == "":
		return "", fmt.Errorf("%q has no host", s)
	case u.User != nil:
		return "", fmt.Errorf("%q must not carry credentials", s)
	case (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "":
		return "", fmt.Errorf("%q must be the apiserver's base URL, without path, query or fragment", s)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return "", fmt.Errorf("%q: port %q is not a number from 1 to 65535", s, p)
		}
	}
	return u.Scheme + "://" + u.Host, nil
}
