// Package features embeds the Gherkin features of the kit, so the loomcheck binary carries them.
// Each feature is executable documentation of one part of the design records.
package features

import "embed"

// FS holds every *.feature file.
//
//go:embed *.feature
var FS embed.FS
