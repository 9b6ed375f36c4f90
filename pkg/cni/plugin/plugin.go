// Package plugin is the logic of the antrea-cni binary: it reads a CNI invocation (CNI_*
// environment variables and the network configuration on stdin), validates it, forwards it to
// the CNI server in antrea-agent over a unix socket and prints the spec-conformant result or
// error. VERSION is answered locally. A DEL that cannot reach the agent is written to a spool
// directory that the agent replays when it starts, so it is never lost.
package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/utils"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/antrea-proxy/antrea-proxy/pkg/cni/protocol"
)

// SupportedVersions are the CNI spec versions antrea-cni speaks.
var supportedVersions = []string{"0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"}

// SupportedVersions returns the CNI spec versions antrea-cni speaks.
func SupportedVersions() []string { return append([]string(nil), supportedVersions...) }

// Env is one CNI invocation's input and output.
type Env struct {
	Getenv func(string) string
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	// Timeout bounds the call to the agent; 0 means 2 minutes.
	Timeout time.Duration
}

// Run carries out one CNI invocation and returns the process exit code: 0 on success, 1 after
// printing a CNI error to stdout.
func Run(ctx context.Context, env Env) int {
	result, cerr := run(ctx, env)
	if cerr != nil {
		enc := json.NewEncoder(env.Stdout)
		enc.SetIndent("", "    ")
		if err := enc.Encode(cerr); err != nil {
			fmt.Fprintf(env.Stderr, "antrea-cni: writing error: %v\n", err)
		}
		return 1
	}
	if result != nil {
		if _, err := env.Stdout.Write(result); err != nil {
			fmt.Fprintf(env.Stderr, "antrea-cni: writing result: %v\n", err)
			return 1
		}
	}
	return 0
}

// invocation is a validated CNI invocation.
type invocation struct {
	req  protocol.Request
	conf *protocol.NetConf
}

// required lists, for each command, the CNI_* variables it needs.
var required = map[string][]string{
	protocol.CmdAdd:    {"CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME", "CNI_PATH"},
	protocol.CmdCheck:  {"CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME", "CNI_PATH"},
	protocol.CmdDel:    {"CNI_CONTAINERID", "CNI_IFNAME", "CNI_PATH"},
	protocol.CmdGC:     {"CNI_PATH"},
	protocol.CmdStatus: {"CNI_PATH"},
}

// minVersion is the first spec version that has a command.
var minVersion = map[string]string{protocol.CmdCheck: "0.4.0", protocol.CmdGC: "1.1.0", protocol.CmdStatus: "1.1.0"}

func run(ctx context.Context, env Env) ([]byte, *types.Error) {
	cmd := env.Getenv("CNI_COMMAND")
	if cmd == protocol.CmdVersion {
		return versionInfo()
	}
	inv, cerr := parse(env, cmd)
	if cerr != nil {
		return nil, cerr
	}
	timeout := env.Timeout
	if timeout == 0 {
		timeout = 2 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := protocol.Call(ctx, inv.conf.SocketPath, inv.req)
	if err != nil {
		return nil, unreachable(inv, err)
	}
	if resp.Error != nil {
		return nil, resp.Error
	}
	if cmd != protocol.CmdAdd {
		return nil, nil
	}
	return convertResult(resp.Result, inv.conf.CNIVersion)
}

// parse reads and validates the environment and the configuration. Nothing is sent anywhere
// before the whole invocation is known to be well-formed.
func parse(env Env, cmd string) (*invocation, *types.Error) {
	if cmd == "" {
		return nil, protocol.NewError(protocol.ErrInvalidEnvironmentVariables, "required env variable CNI_COMMAND missing", "")
	}
	req, ok := required[cmd]
	if !ok {
		return nil, protocol.Errorf(protocol.ErrInvalidEnvironmentVariables, "unknown CNI_COMMAND %q", cmd)
	}
	var missing []string
	for _, v := range req {
		if env.Getenv(v) == "" {
			missing = append(missing, v)
		}
	}
	if len(missing) > 0 {
		return nil, protocol.Errorf(protocol.ErrInvalidEnvironmentVariables, "required env variables [%s] missing", strings.Join(missing, ","))
	}
	r := protocol.Request{
		Command:     cmd,
		ContainerID: env.Getenv("CNI_CONTAINERID"),
		Netns:       env.Getenv("CNI_NETNS"),
		IfName:      env.Getenv("CNI_IFNAME"),
		Args:        env.Getenv("CNI_ARGS"),
		Path:        env.Getenv("CNI_PATH"),
	}
	if r.ContainerID != "" {
		if err := utils.ValidateContainerID(r.ContainerID); err != nil {
			return nil, protocol.NewError(protocol.ErrInvalidEnvironmentVariables, "invalid CNI_CONTAINERID", err.Error())
		}
	}
	if r.IfName != "" {
		if err := utils.ValidateInterfaceName(r.IfName); err != nil {
			return nil, protocol.NewError(protocol.ErrInvalidEnvironmentVariables, "invalid CNI_IFNAME", err.Error())
		}
	}
	if _, err := protocol.ParseArgs(r.Args); err != nil {
		return nil, protocol.NewError(protocol.ErrInvalidEnvironmentVariables, "invalid CNI_ARGS", err.Error())
	}
	stdin, err := io.ReadAll(io.LimitReader(env.Stdin, 1<<20))
	if err != nil {
		return nil, protocol.NewError(protocol.ErrIOFailure, "reading network configuration from stdin", err.Error())
	}
	conf, cerr := protocol.ParseNetConf(stdin)
	if cerr != nil {
		return nil, cerr
	}
	if cerr := checkVersion(cmd, conf.CNIVersion); cerr != nil {
		return nil, cerr
	}
	r.Config = stdin
	return &invocation{req: r, conf: conf}, nil
}

// checkVersion rejects configurations of a spec version the plugin does not speak, and
// commands that the configuration's version does not have.
func checkVersion(cmd, v string) *types.Error {
	if _, _, _, err := version.ParseVersion(v); err != nil {
		return protocol.NewError(protocol.ErrDecodingFailure, "invalid cniVersion", err.Error())
	}
	supported := false
	for _, s := range supportedVersions {
		if s == v {
			supported = true
		}
	}
	if !supported {
		return protocol.NewError(protocol.ErrIncompatibleCNIVersion, "incompatible CNI versions",
			fmt.Sprintf("config is %q, plugin supports %q", v, supportedVersions))
	}
	if min, ok := minVersion[cmd]; ok {
		if ge, _ := version.GreaterThanOrEqualTo(v, min); !ge {
			return protocol.Errorf(protocol.ErrIncompatibleCNIVersion, "config version %s does not allow %s (needs %s)", v, cmd, min)
		}
	}
	return nil
}

// unreachable turns a failed call to the agent into the command's answer: a spooled DEL
// succeeds, everything else is an error the runtime understands.
func unreachable(inv *invocation, err error) *types.Error {
	switch inv.req.Command {
	case protocol.CmdDel:
		if serr := protocol.WriteSpool(inv.conf.DelSpoolDir, inv.req); serr != nil {
			return protocol.NewError(protocol.ErrIOFailure, "antrea-agent unreachable and DEL could not be spooled",
				fmt.Sprintf("%v; %v", err, serr))
		}
		return nil
	case protocol.CmdStatus:
		return protocol.NewError(protocol.ErrPluginNotAvailable, "antrea-agent is not available", err.Error())
	}
	if errors.Is(err, protocol.ErrUnreachable) || errors.Is(err, context.DeadlineExceeded) {
		return protocol.NewError(protocol.ErrTryAgainLater, "antrea-agent is not available, try again later", err.Error())
	}
	return protocol.NewError(protocol.ErrTryAgainLater, "calling antrea-agent failed, try again later", err.Error())
}

// convertResult turns the agent's CNI 1.0.0 result into the configuration's version.
func convertResult(raw json.RawMessage, confVersion string) ([]byte, *types.Error) {
	if len(raw) == 0 {
		return nil, protocol.NewError(protocol.ErrInternal, "antrea-agent returned no result for ADD", "")
	}
	res, err := types100.NewResult(raw)
	if err != nil {
		return nil, protocol.NewError(protocol.ErrInternal, "decoding antrea-agent result", err.Error())
	}
	conv, err := res.GetAsVersion(confVersion)
	if err != nil {
		return nil, protocol.NewError(protocol.ErrIncompatibleCNIVersion, "converting result", err.Error())
	}
	out, err := json.MarshalIndent(conv, "", "    ")
	if err != nil {
		return nil, protocol.NewError(protocol.ErrInternal, "encoding result", err.Error())
	}
	return append(out, '\n'), nil
}

func versionInfo() ([]byte, *types.Error) {
	out, err := json.Marshal(map[string]any{"cniVersion": supportedVersions[len(supportedVersions)-1], "supportedVersions": supportedVersions})
	if err != nil {
		return nil, protocol.NewError(protocol.ErrInternal, "encoding version", err.Error())
	}
	return append(out, '\n'), nil
}
