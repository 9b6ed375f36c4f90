package apiserver

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/klog/v2"

	"github.com/antrea-proxy/antrea-proxy/pkg/agent/apiserver/apiv1"
	"github.com/antrea-proxy/antrea-proxy/pkg/config"
	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/pipeline"
	"github.com/antrea-proxy/antrea-proxy/pkg/version"
)

// OVSStatus is what the API reads from the OVSDB client; *ovsdb.Client implements it.
type OVSStatus interface {
	OVSVersion(ctx context.Context) (string, error)
	Connected() bool
}

// handlers serves the API's paths. services is nil when AntreaProxy is disabled.
type handlers struct {
	cfg      *config.AgentConfig
	services ServiceSource
	ovs      OVSStatus
	livez    http.Handler
	tracer   TraceSource
}

func (h *handlers) mux() http.Handler {
	m := http.NewServeMux()
	m.HandleFunc(apiv1.PathServiceMap, h.getServiceMap(h.serviceMap))
	m.HandleFunc(apiv1.PathOVSFlows, h.get(h.ovsFlows))
	m.HandleFunc(apiv1.PathAgentInfo, h.get(h.agentInfo))
	m.HandleFunc(apiv1.PathVersion, h.get(h.version))
	m.HandleFunc(apiv1.PathTrace, h.get(h.trace))
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok"))
	})
	m.Handle(apiv1.PathHealthz, getOrHead(ok))
	livez := h.livez
	if livez == nil {
		livez = ok
	}
	m.Handle(apiv1.PathLivez, getOrHead(livez))
	if h.cfg.EnablePprof {
		registerPprof(m)
	}
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "path %q not found; the agent API serves %s", r.URL.Path,
			strings.Join([]string{apiv1.PathServiceMap, apiv1.PathOVSFlows, apiv1.PathAgentInfo, apiv1.PathVersion, apiv1.PathTrace, apiv1.PathHealthz, apiv1.PathLivez}, ", "))
	})
	return m
}

// getOrHead refuses every method but GET and HEAD before next.
func getOrHead(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			writeError(w, http.StatusMethodNotAllowed, "%s %s: only GET is allowed", r.Method, r.URL.Path)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// apiError is a handler failure with its HTTP status.
type apiError struct {
	code int
	msg  string
}

func (e *apiError) Error() string { return e.msg }

func errorf(code int, format string, args ...any) *apiError {
	return &apiError{code: code, msg: fmt.Sprintf(format, args...)}
}

// get wraps a handler that returns an object to encode as JSON; only GET is allowed.
func (h *handlers) get(fn func(r *http.Request) (any, *apiError)) http.HandlerFunc {
	return getThen(fn, func(w http.ResponseWriter, obj any) { writeJSON(w, http.StatusOK, obj) })
}

// getThen wraps a handler that returns a T, written by write on success; only GET is allowed,
// and a handler's error is written as an API error.
func getThen[T any](fn func(r *http.Request) (T, *apiError), write func(http.ResponseWriter, T)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			writeError(w, http.StatusMethodNotAllowed, "%s %s: only GET is allowed", r.Method, r.URL.Path)
			return
		}
		obj, err := fn(r)
		if err != nil {
			writeError(w, err.code, "%s", err.msg)
			return
		}
		write(w, obj)
	}
}

func writeJSON(w http.ResponseWriter, code int, obj any) {
	body, err := json.MarshalIndent(obj, "", "  ")
	if err != nil {
		klog.ErrorS(err, "Encoding agent API answer")
		code, body = http.StatusInternalServerError, []byte(`{"kind":"Error","apiVersion":"v1","code":500,"reason":"InternalError","message":"encoding the answer failed"}`)
	}
	writeJSONHeader(w, code)
	_, _ = w.Write(append(body, '\n'))
}

// writeJSONHeader writes the headers and status of a JSON answer.
func writeJSONHeader(w http.ResponseWriter, code int) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
}

func writeError(w http.ResponseWriter, code int, format string, args ...any) {
	writeJSON(w, code, apiv1.Error{Kind: "Error", APIVersion: apiv1.APIVersion, Code: code,
		Reason: reasonOf(code), Message: fmt.Sprintf(format, args...)})
}

func reasonOf(code int) string {
	switch code {
	case http.StatusBadRequest:
		return "BadRequest"
	case http.StatusUnauthorized:
		return "Unauthorized"
	case http.StatusForbidden:
		return "Forbidden"
	case http.StatusNotFound:
		return "NotFound"
	case http.StatusMethodNotAllowed:
		return "MethodNotAllowed"
	case http.StatusServiceUnavailable:
		return "ServiceUnavailable"
	}
	return "InternalError"
}

func (h *handlers) proxier() (ServiceSource, *apiError) {
	if h.services == nil {
		return nil, errorf(http.StatusServiceUnavailable, "AntreaProxy is disabled on this agent (antreaProxy.enable=false)")
	}
	return h.services, nil
}

func (h *handlers) serviceMap(r *http.Request) (apiv1.ServiceMap, *apiError) {
	var none apiv1.ServiceMap
	q := r.URL.Query()
	f := ServiceFilter{Namespace: q.Get(apiv1.QueryNamespace), Name: q.Get(apiv1.QueryName)}
	switch all := q.Get(apiv1.QueryAll); all {
	case "", "false":
	case "true":
		f.AllNamespaces = true
	default:
		return none, errorf(http.StatusBadRequest, "query parameter %s=%q must be true or false", apiv1.QueryAll, all)
	}
	if f.AllNamespaces && f.Namespace != "" {
		return none, errorf(http.StatusBadRequest, "query parameters %s and %s=true are exclusive", apiv1.QueryNamespace, apiv1.QueryAll)
	}
	if f.AllNamespaces && f.Name != "" {
		return none, errorf(http.StatusBadRequest, "a Service cannot be selected by name (%q) across all namespaces", f.Name)
	}
	if f.Namespace == "" {
		f.Namespace = "default"
	}
	if msgs := validation.IsDNS1123Label(f.Namespace); len(msgs) > 0 {
		return none, errorf(http.StatusBadRequest, "namespace %q is invalid: %s", f.Namespace, strings.Join(msgs, "; "))
	}
	src, err := h.proxier()
	if err != nil {
		return none, err
	}
	m := BuildServiceMap(src, f)
	if f.Name != "" && len(m.Items) == 0 {
		return none, errorf(http.StatusNotFound, "Service %s/%s is not programmed by this agent (it does not exist, is skipped, or has no cluster IP)", f.Namespace, f.Name)
	}
	return m, nil
}

func (h *handlers) ovsFlows(r *http.Request) (any, *apiError) {
	src, err := h.proxier()
	if err != nil {
		return nil, err
	}
	var names *of.Names
	switch v := r.URL.Query().Get(apiv1.QueryNames); v {
	case "", "true":
		names = pipeline.Names()
	case "false":
	default:
		return nil, errorf(http.StatusBadRequest, "query parameter %s=%q must be true or false", apiv1.QueryNames, v)
	}
	s := r.URL.Query().Get(apiv1.QueryService)
	if s == "" {
		return BuildOVSFlows(src, nil, names), nil
	}
	ns, name, ok := strings.Cut(s, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return nil, errorf(http.StatusBadRequest, "query parameter %s=%q must be \"namespace/name\"", apiv1.QueryService, s)
	}
	nn := types.NamespacedName{Namespace: ns, Name: name}
	found := false
	for _, svc := range src.Services() {
		if svc.Name == nn {
			found = true
			break
		}
	}
	if !found {
		return nil, errorf(http.StatusNotFound, "Service %s is not programmed by this agent", nn)
	}
	return BuildOVSFlows(src, &nn, names), nil
}

func (h *handlers) agentInfo(r *http.Request) (any, *apiError) {
	c := h.cfg
	ap := c.AntreaProxy
	info := apiv1.AgentInfo{
		Kind: "AgentInfo", APIVersion: apiv1.APIVersion, Version: version.Version,
		NodeName: c.NodeName, OVSBridge: c.OVSBridge, OVSDatapathType: c.OVSDatapathType,
		APISocket: c.APISocket, APITCPAddress: c.APITCPAddress,
		AntreaProxy: apiv1.ProxyConfig{
			Enabled:              ap.Enabled(),
			ProxyAll:             ap.ProxyAll,
			ProxyLoadBalancerIPs: ap.ProxyLoadBalancerIPsEnabled(),
			NodePortAddresses:    append([]string{}, ap.NodePortAddresses...),
			SkipServices:         append([]string{}, ap.SkipServices...),
			ServiceProxyName:     ap.ServiceProxyName,
			MinSyncInterval:      ap.MinSyncInterval.Duration.String(),
			FullSyncPeriod:       ap.FullSyncPeriod.Duration.String(),
		},
	}
	if h.ovs != nil {
		info.OVS.Connected = h.ovs.Connected()
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if v, err := h.ovs.OVSVersion(ctx); err == nil {
			info.OVS.Version = v
		} else {
			klog.V(2).InfoS("Reading the OVS version for agentinfo", "err", err)
		}
	}
	if h.services != nil {
		last, syncs, err := h.services.SyncState()
		if !last.IsZero() {
			info.Sync.LastSync = last.UTC().Format(time.RFC3339)
		}
		if err != nil {
			info.Sync.LastError = err.Error()
		}
		info.Sync.Syncs = syncs
		info.Sync.Round = h.services.Round()
		for _, svc := range h.services.Services() {
			info.Services++
			info.ServicePorts += len(svc.Ports)
		}
	}
	return info, nil
}

func (h *handlers) version(*http.Request) (any, *apiError) {
	return apiv1.Version{Kind: "Version", APIVersion: apiv1.APIVersion, Version: version.Version, GoVersion: runtime.Version()}, nil
}
