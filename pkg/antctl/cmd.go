package antctl

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/antrea-proxy/antrea-proxy/pkg/agent/apiserver/apiv1"
	"github.com/antrea-proxy/antrea-proxy/pkg/config"
	"github.com/antrea-proxy/antrea-proxy/pkg/version"
)

// Main runs antctl with args (without the program name) and returns the exit code: 0 on
// success, 1 on any error, reported as one "error: ..." line on stderr.
func Main(args []string, stdout, stderr io.Writer) int {
	return MainWithClock(args, stdout, stderr, time.Now)
}

// MainWithClock is Main with the clock that ages timestamps in tables.
func MainWithClock(args []string, stdout, stderr io.Writer, now func() time.Time) int {
	cmd := NewCommand(stdout, stderr, now)
	cmd.SetArgs(args)
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		fmt.Fprintln(stderr, "error: "+oneLine(err.Error()))
		return 1
	}
	return 0
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", "; ")), " ")
}

// globals are the flags every command shares.
type globals struct {
	socket, server, tokenFile string
	timeout                   time.Duration
	now                       func() time.Time
}

func (g *globals) client() (*Client, error) {
	return NewClient(ClientOptions{Socket: g.socket, Server: g.server, TokenFile: g.tokenFile, Timeout: g.timeout})
}

// NewCommand builds the antctl command tree writing to stdout and stderr.
func NewCommand(stdout, stderr io.Writer, now func() time.Time) *cobra.Command {
	g := &globals{now: now}
	root := &cobra.Command{
		Use:   "antctl",
		Short: "antctl shows what antrea-agent programmed on this node",
		Long: "antctl reads antrea-agent's local API (a root-only unix socket) and shows the Services the agent\n" +
			"programmed into Open vSwitch, and why each load balancer ingress is or is not handled on the node.",
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	pf := root.PersistentFlags()
	pf.StringVar(&g.socket, "socket", config.DefaultAPISocket, "unix socket of the agent API")
	pf.StringVar(&g.server, "server", "", "TCP address of the agent API (host:port, loopback only); needs --token-file")
	pf.StringVar(&g.tokenFile, "token-file", "", "file holding the bearer token for --server")
	pf.DurationVar(&g.timeout, "timeout", 10*time.Second, "timeout of each request to the agent")

	get := &cobra.Command{Use: "get", Short: "Show one kind of agent state", Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return fmt.Errorf("get needs a resource: one of servicemap, ovsflows, agentinfo")
		}}
	get.AddCommand(serviceMapCommand(g), ovsFlowsCommand(g), agentInfoCommand(g))
	root.AddCommand(get, traceCommand(g), versionCommand(g))
	return root
}

func checkFormat(o string, allowed ...string) error {
	for _, a := range allowed {
		if o == a {
			return nil
		}
	}
	return fmt.Errorf("unknown output format %q: want one of %s", o, strings.Join(allowed, "|"))
}

func serviceMapCommand(g *globals) *cobra.Command {
	var namespace, output string
	var all bool
	c := &cobra.Command{
		Use:     "servicemap [NAME]",
		Aliases: []string{"servicemaps", "sm"},
		Short:   "Show every Service port the agent programmed, with each LB ingress's decision and reason",
		Example: "  antctl get servicemap -A\n  antctl get servicemap web -n default -o wide\n  antctl get servicemap -A -o yaml",
		Args:    cobra.MaximumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if err := checkFormat(output, "table", "wide", "json", "yaml"); err != nil {
				return err
			}
			q := url.Values{}
			switch {
			case all && len(args) > 0:
				return fmt.Errorf("a Service cannot be selected by name (%q) across all namespaces (-A)", args[0])
			case all && c.Flags().Changed("namespace"):
				return fmt.Errorf("--namespace and --all-namespaces are exclusive")
			case all:
				q.Set(apiv1.QueryAll, "true")
			default:
				q.Set(apiv1.QueryNamespace, namespace)
			}
			if len(args) > 0 {
				q.Set(apiv1.QueryName, args[0])
			}
			cl, err := g.client()
			if err != nil {
				return err
			}
			var m apiv1.ServiceMap
			if err := cl.Get(c.Context(), apiv1.PathServiceMap, q, &m); err != nil {
				return err
			}
			if len(m.Items) == 0 && (output == "table" || output == "wide") {
				if all {
					fmt.Fprintln(c.ErrOrStderr(), "No resources found")
				} else {
					fmt.Fprintf(c.ErrOrStderr(), "No resources found in %s namespace.\n", namespace)
				}
				return nil
			}
			return PrintServiceMap(c.OutOrStdout(), m, output, all, g.now())
		},
	}
	c.Flags().StringVarP(&namespace, "namespace", "n", "default", "namespace of the Services")
	c.Flags().BoolVarP(&all, "all-namespaces", "A", false, "show Services of every namespace")
	c.Flags().StringVarP(&output, "output", "o", "table", "output format: table|wide|json|yaml")
	return c
}

func ovsFlowsCommand(g *globals) *cobra.Command {
	var service, output string
	var noNames bool
	c := &cobra.Command{
		Use:     "ovsflows",
		Aliases: []string{"of"},
		Short:   "Show the OVS flows and groups installed for a Service (all Services without -S)",
		Example: "  antctl get ovsflows -S default/web",
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := checkFormat(output, "text", "json", "yaml"); err != nil {
				return err
			}
			q := url.Values{}
			if service != "" {
				q.Set(apiv1.QueryService, service)
			}
			if noNames {
				q.Set(apiv1.QueryNames, "false")
			}
			cl, err := g.client()
			if err != nil {
				return err
			}
			var f apiv1.OVSFlows
			if err := cl.Get(c.Context(), apiv1.PathOVSFlows, q, &f); err != nil {
				return err
			}
			return PrintOVSFlows(c.OutOrStdout(), f, output)
		},
	}
	c.Flags().StringVarP(&service, "service", "S", "", "the Service, as namespace/name")
	c.Flags().StringVarP(&output, "output", "o", "text", "output format: text|json|yaml")
	c.Flags().BoolVar(&noNames, "no-names", false, "show tables and registers by number (table=14, reg0=0x1/0xf), as ovs-ofctl --no-names")
	return c
}

func agentInfoCommand(g *globals) *cobra.Command {
	var output string
	c := &cobra.Command{
		Use:   "agentinfo",
		Short: "Show the agent's configuration in effect, the OVS version and connection, and the sync state",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := checkFormat(output, "text", "json", "yaml"); err != nil {
				return err
			}
			cl, err := g.client()
			if err != nil {
				return err
			}
			var info apiv1.AgentInfo
			if err := cl.Get(c.Context(), apiv1.PathAgentInfo, nil, &info); err != nil {
				return err
			}
			return PrintAgentInfo(c.OutOrStdout(), info, output, g.now())
		},
	}
	c.Flags().StringVarP(&output, "output", "o", "text", "output format: text|json|yaml")
	return c
}

func versionCommand(g *globals) *cobra.Command {
	var clientOnly bool
	c := &cobra.Command{
		Use:   "version",
		Short: "Show the versions of antctl and of the agent",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			fmt.Fprintf(c.OutOrStdout(), "antctl version: %s\n", version.Version)
			if clientOnly {
				return nil
			}
			cl, err := g.client()
			if err != nil {
				return err
			}
			var v apiv1.Version
			if err := cl.Get(c.Context(), apiv1.PathVersion, nil, &v); err != nil {
				return err
			}
			fmt.Fprintf(c.OutOrStdout(), "antrea-agent version: %s (%s)\n", v.Version, v.GoVersion)
			return nil
		},
	}
	c.Flags().BoolVar(&clientOnly, "client", false, "show only antctl's version")
	return c
}
