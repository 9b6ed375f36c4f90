// Package tracker accumulates Service and EndpointSlice changes between two proxier syncs.
//
// Informer event handlers feed the trackers (from any goroutine); the proxier's sync loop drains
// them. ServiceChangeTracker keeps, per Service, the object as of the last sync and the latest
// one, and drops changes that cancel out. EndpointsChangeTracker keeps the current set of
// EndpointSlices of every Service and the set of Services whose slices changed. Trackers store
// raw API objects; conversion to the proxier's model happens in the proxier with the functions
// of package model. Tracker combines both and offers a change notification.
package tracker
