// Package reconciler owns what every writer of one OVS bridge has installed: the proxier's base,
// Service and endpoint flows and groups, the gateway's flows and the pods' flows. Writers state
// what they want per owner (an Owner: a Kind and a key) and commit; the reconciler turns the
// change into the net difference with the installed state, sends it as one bundle, attributes
// an op OVS rejects to its owners and changes the installed state only when OVS accepted the
// bundle. It verifies OVS against the installed state (flow counts per cookie category of this
// round, ignoring what it counts while a bundle is in flight) and replays everything in one
// bundle after OVS lost it.
//
// The installed state keeps each flow once, under its key (table, priority, match), with the
// owners that want it and a 128-bit digest of its text: never the text (memory at scale).
package reconciler
