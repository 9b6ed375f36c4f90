package framework

import (
	"path/filepath"
)

// CNIStateDir is the node agent's CNI state directory, as agentConfig sets it (pod records in
// pods/, address reservations in ipam/, unusable files moved into quarantine/).
func (n *Node) CNIStateDir() string { return filepath.Join(n.Dir, "cni-state") }

// CNIDelSpoolDir is where the node's antrea-cni spools DELs while the agent is down, as
// agentConfig sets it.
func (n *Node) CNIDelSpoolDir() string { return filepath.Join(n.Dir, "cni-del-spool") }
