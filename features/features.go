// Package features embeds the Gherkin features of the kit, so the loomcheck binary carries them.
// Each feature is executable documentation of one part of the design records, kept as
// <area>/<topic>.feature; its steps live in harness/steps/<area>_<topic>.go.
package features

import (
	"embed"
	"io/fs"
	"path"
	"sort"
)

// FS holds every <area>/<topic>.feature file.
//
//go:embed */*.feature
var FS embed.FS

// Files is the path of every *.feature file of fsys, at any depth, sorted.
//
//	names, err := features.Files(features.FS) // "agent/approvals.feature", ...
func Files(fsys fs.FS) ([]string, error) {
	var out []string
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && path.Ext(p) == ".feature" {
			out = append(out, p)
		}
		return nil
	})
	sort.Strings(out)
	return out, err
}
