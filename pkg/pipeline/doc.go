// Package pipeline is antrea-proxy's OpenFlow service pipeline: the tables, registers, conntrack
// zones, marks and cookies it uses, and pure functions that turn the proxy model (a ServicePort
// and its endpoints) into the OpenFlow groups and flows that implement it. Nothing here talks to
// OVS; the proxier diffs what these functions return against what is installed and sends the
// difference through an openflow.Bridge. Names gives the tables' and registers' names, with
// which dumps for people show flows. docs/design/ovs-pipeline.md describes the pipeline.
package pipeline
