//go:build race

package harness

// raceBuild is true when the kit is built with the race detector, which slows the kit and an
// in-process system alike several times over.
const raceBuild = true
