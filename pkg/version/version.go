// Package version carries the build version of antrea-proxy's binaries, set by the Makefile
// through -ldflags.
package version

// Version is set at build time; "dev" otherwise.
var Version = "dev"
