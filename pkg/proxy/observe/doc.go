// Package observe is the proxier's event contract: Observer, the hook the proxier (package
// proxy) calls when a change is queued, when its Node changes and after every sync, and
// SyncResult, what one sync did. It is a leaf (it knows only the proxier's model), so the
// consumers of the events (package metrics, package healthcheck, the agent) depend on the
// proxier's contract and not on each other.
package observe
