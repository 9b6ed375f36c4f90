package antctl

import (
	"fmt"
	"io"
	"net/url"
	"strings"

	"github.com/spf13/cobra"

	"github.com/antrea-proxy/antrea-proxy/pkg/agent/apiserver/apiv1"
)

func traceCommand(g *globals) *cobra.Command {
	var from, to, output string
	c := &cobra.Command{
		Use:   "trace --from pod NS/NAME|node|external[:IP] --to IP:PORT[/PROTO]",
		Short: "Trace a new connection's first packet through the flows and groups the agent installed",
		Long: "trace builds the first packet of a connection (from a local pod, from the node itself or from an\n" +
			"external client arriving through the gateway) and walks it through the flows and groups the agent\n" +
			"installed, with conntrack state new. It prints every flow hit with its table name, every candidate\n" +
			"endpoint of the Service's select group, the NAT applied, where the packet leaves and, when no endpoint\n" +
			"was chosen, why (from the agent's status of the Service that owns the address).",
		Example: "  antctl trace --from pod default/client --to 10.96.0.10:80\n" +
			"  antctl trace --from external:203.0.113.7 --to 192.168.77.10:30080/TCP -o json\n" +
			"  antctl trace --from node --to 10.96.0.53:53/UDP",
		Args: cobra.ArbitraryArgs,
		RunE: func(c *cobra.Command, args []string) error {
			if err := checkFormat(output, "text", "json", "yaml"); err != nil {
				return err
			}
			f, err := traceFrom(from, args)
			if err != nil {
				return err
			}
			if to == "" {
				return fmt.Errorf("--to IP:PORT[/PROTO] is required")
			}
			cl, err := g.client()
			if err != nil {
				return err
			}
			var tr apiv1.Trace
			q := url.Values{apiv1.QueryFrom: {f}, apiv1.QueryTo: {to}}
			if err := cl.Get(c.Context(), apiv1.PathTrace, q, &tr); err != nil {
				return err
			}
			return PrintTrace(c.OutOrStdout(), tr, output)
		},
	}
	c.Flags().StringVar(&from, "from", "", "the source: pod (followed by NAMESPACE/NAME), node, external or external:IP")
	c.Flags().StringVar(&to, "to", "", "the destination IP:PORT[/PROTO] (TCP, UDP or SCTP; TCP by default)")
	c.Flags().StringVarP(&output, "output", "o", "text", "output format: text|json|yaml")
	return c
}

// traceFrom turns --from and the command's arguments into the API's from value: "--from pod
// NS/NAME" (the pod as an argument), "--from pod:NS/NAME", "--from node", "--from external[:IP]".
func traceFrom(from string, args []string) (string, error) {
	switch {
	case from == "":
		return "", fmt.Errorf("--from pod NS/NAME|node|external[:IP] is required")
	case from == apiv1.FromPod && len(args) == 1:
		return apiv1.FromPod + ":" + args[0], nil
	case from == apiv1.FromPod:
		return "", fmt.Errorf("--from pod needs the pod as NAMESPACE/NAME")
	case len(args) > 0:
		return "", fmt.Errorf("unexpected arguments %q", strings.Join(args, " "))
	}
	return from, nil
}

// PrintTrace prints a trace as text (ovs-appctl ofproto/trace style, with table names), JSON or
// YAML.
func PrintTrace(w io.Writer, tr apiv1.Trace, format string) error {
	switch format {
	case "json":
		return printJSON(w, tr)
	case "yaml":
		return printYAML(w, tr)
	}
	p := tr.Packet
	fmt.Fprintf(w, "Packet:     %s %s -> %s from %s\n", p.Protocol, p.Src, p.Dst, p.InPortAs)
	fmt.Fprintf(w, "            eth %s -> %s, in_port=%d, conntrack state new\n\n", orNone(p.EthSrc), orNone(p.EthDst), p.InPort)
	for _, s := range tr.Steps {
		ind := strings.Repeat("    ", s.Depth)
		switch s.Kind {
		case "flow":
			line := fmt.Sprintf("%s%2d. %s: priority %d", ind, s.Table, s.TableName, s.Priority)
			if s.Match != "" {
				line += ", " + s.Match
			}
			fmt.Fprintln(w, line)
			fmt.Fprintf(w, "%s    actions: %s\n", ind, s.Actions)
		case "miss":
			fmt.Fprintf(w, "%s%2d. %s: %s\n", ind, s.Table, s.TableName, s.Text)
		default:
			fmt.Fprintf(w, "%s    -> %s\n", ind, s.Text)
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Service:    %s\n", orNone(tr.Service))
	fmt.Fprintf(w, "Candidates: %s\n", candidatesText(tr.Candidates))
	fmt.Fprintf(w, "Chosen:     %s\n", orNone(tr.Chosen))
	fmt.Fprintf(w, "NAT:        %s\n", orNone(strings.Join(tr.NAT, ", ")))
	out := tr.Verdict
	if tr.Output != "" {
		out += " to " + tr.Output
	}
	fmt.Fprintf(w, "Verdict:    %s, in table %s\n", out, tr.Table)
	printList(w, "Why:        ", tr.Reasons)
	printList(w, "Notes:      ", tr.Notes)
	return nil
}

func orNone(s string) string {
	if s == "" {
		return none
	}
	return s
}

func candidatesText(cs []apiv1.TraceEndpoint) string {
	if len(cs) == 0 {
		return none
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d", len(cs))
	for _, c := range cs {
		fmt.Fprintf(&b, "\n            %s (group %d bucket %d, weight %d)", c.Endpoint, c.Group, c.Bucket, c.Weight)
	}
	return b.String()
}

func printList(w io.Writer, label string, items []string) {
	for i, it := range items {
		if i > 0 {
			label = strings.Repeat(" ", len(label))
		}
		fmt.Fprintf(w, "%s%s\n", label, it)
	}
}
