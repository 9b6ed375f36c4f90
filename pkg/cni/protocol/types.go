package protocol

import (
	"encoding/json"
	"fmt"
	"strings"

	cnitypes "github.com/containernetworking/cni/pkg/types"
)

// Defaults the plugin uses when the network configuration does not say.
const (
	DefaultSocketPath = "/var/run/antrea/cni.sock"
	DefaultSpoolDir   = "/var/run/antrea/cni-del-spool"
)

// CNI commands.
const (
	CmdAdd     = "ADD"
	CmdDel     = "DEL"
	CmdCheck   = "CHECK"
	CmdStatus  = "STATUS"
	CmdGC      = "GC"
	CmdVersion = "VERSION"
)

// CNI error codes: the spec's well-known ones (1-99) and this plugin's own (100+).
const (
	ErrIncompatibleCNIVersion      uint = 1
	ErrUnsupportedField            uint = 2
	ErrUnknownContainer            uint = 3
	ErrInvalidEnvironmentVariables uint = 4
	ErrIOFailure                   uint = 5
	ErrDecodingFailure             uint = 6
	ErrInvalidNetworkConfig        uint = 7
	ErrTryAgainLater               uint = 11
	ErrPluginNotAvailable          uint = 50
	ErrLimitedConnectivity         uint = 51
	// ErrNoFreeAddress: the Node's podCIDR has no free address left.
	ErrNoFreeAddress uint = 100
	// ErrInternal: anything else that went wrong in the agent.
	ErrInternal uint = 999
)

// Error is a CNI error as the spec prints it.
type Error = cnitypes.Error

// NewError returns a CNI error.
func NewError(code uint, msg, details string) *Error { return cnitypes.NewError(code, msg, details) }

// Errorf returns a CNI error with a formatted message.
func Errorf(code uint, format string, args ...any) *Error {
	return cnitypes.NewError(code, fmt.Sprintf(format, args...), "")
}

// Request is one CNI invocation as the plugin received it.
type Request struct {
	Command     string `json:"command"`
	ContainerID string `json:"containerID,omitempty"`
	Netns       string `json:"netns,omitempty"`
	IfName      string `json:"ifName,omitempty"`
	// Args is CNI_ARGS, e.g. "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-0".
	Args string `json:"args,omitempty"`
	Path string `json:"path,omitempty"`
	// Config is the network configuration from stdin, verbatim.
	Config json.RawMessage `json:"config"`
}

// Response is the agent's answer: a CNI result (for ADD: a CNI 1.0.0-format result that the
// plugin converts to the configuration's version) or a CNI error.
type Response struct {
	Result json.RawMessage `json:"result,omitempty"`
	Error  *Error          `json:"error,omitempty"`
}

// NetConf is the part of the network configuration antrea-cni reads.
type NetConf struct {
	CNIVersion string `json:"cniVersion"`
	Name       string `json:"name"`
	Type       string `json:"type"`
	// SocketPath is the agent's CNI socket; DefaultSocketPath when empty.
	SocketPath string `json:"socketPath,omitempty"`
	// DelSpoolDir keeps DEL requests the agent could not take; DefaultSpoolDir when empty.
	DelSpoolDir string `json:"delSpoolDir,omitempty"`
	// PrevResult is the result of the previous ADD, given to CHECK and DEL.
	PrevResult json.RawMessage `json:"prevResult,omitempty"`
	// ValidAttachments is given to GC: every attachment not listed may be removed.
	ValidAttachments []Attachment `json:"cni.dev/valid-attachments,omitempty"`
}

// Attachment names one container interface.
type Attachment struct {
	ContainerID string `json:"containerID"`
	IfName      string `json:"ifname"`
}

// ParseNetConf decodes and checks a network configuration: bad JSON is a decoding failure,
// a configuration without name or cniVersion is an invalid network configuration.
func ParseNetConf(data []byte) (*NetConf, *Error) {
	var c NetConf
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, NewError(ErrDecodingFailure, "decoding network configuration", err.Error())
	}
	if c.Name == "" {
		return nil, NewError(ErrInvalidNetworkConfig, "network configuration has no name", "")
	}
	if c.CNIVersion == "" {
		return nil, NewError(ErrInvalidNetworkConfig, "network configuration has no cniVersion", "")
	}
	if c.SocketPath == "" {
		c.SocketPath = DefaultSocketPath
	}
	if c.DelSpoolDir == "" {
		c.DelSpoolDir = DefaultSpoolDir
	}
	return &c, nil
}

// Kubernetes pod identity keys in CNI_ARGS.
const (
	ArgPodNamespace = "K8S_POD_NAMESPACE"
	ArgPodName      = "K8S_POD_NAME"
)

// ParseArgs splits CNI_ARGS ("K1=V1;K2=V2") into a map. An element without "=" is an error.
func ParseArgs(s string) (map[string]string, error) {
	out := map[string]string{}
	if s == "" {
		return out, nil
	}
	for _, kv := range strings.Split(s, ";") {
		if kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("CNI_ARGS element %q is not KEY=VALUE", kv)
		}
		out[k] = v
	}
	return out, nil
}
