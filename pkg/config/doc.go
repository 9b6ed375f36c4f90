// Package config defines the schema of antrea-agent.conf, the YAML file that
// configures the antrea-proxy agent, and the code that turns the file into a
// ready-to-use AgentConfig.
//
// The file uses the layout and camelCase keys of Antrea's antrea-agent.conf.
// Loading is strict and happens in three steps:
//
//  1. decode: the YAML is converted to JSON and checked against the schema;
//     every unknown key (named with its full path, e.g.
//     "antreaProxy.proxyLoadBalancerIP") and every value of the wrong type
//     is reported;
//  2. default: every option left unset gets its default (see
//     AgentConfig.Defaults); the node name comes from the NODE_NAME
//     environment variable, else from the host name;
//  3. validate: every remaining problem is reported at once, each error
//     naming the option's path (see AgentConfig.Validate and FieldError).
//
// An empty file is valid and yields the defaults. testdata/antrea-agent.conf
// is a fully commented example that documents every option.
package config
