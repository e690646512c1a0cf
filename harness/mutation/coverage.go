package mutation

import (
	"bufio"
	"fmt"
	"os"
	"strings"
)

// coverage is the union of the blocks the killing suite executed, per file: for a package, its
// own tests' blocks and the conformance run's.
type coverage struct {
	module string
	// blocks by file (relative to the module root), tagged with the run that measured them
	blocks map[string][]block
}

type block struct {
	run                 string // the package whose tests ran, or conformanceRun of a profile
	sl, sc, el, ec, hit int
}

func (c *coverage) read(profile, run string) error {
	f, err := os.Open(profile)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "mode:") {
			continue
		}
		// name.go:12.34,15.2 3 1
		colon := strings.LastIndex(line, ":")
		if colon < 0 {
			continue
		}
		file := strings.TrimPrefix(line[:colon], c.module+"/")
		var b block
		if _, err := fmt.Sscanf(line[colon+1:], "%d.%d,%d.%d %d %d", &b.sl, &b.sc, &b.el, &b.ec, new(int), &b.hit); err != nil {
			return fmt.Errorf("mutation: coverage profile %s: %q: %w", profile, line, err)
		}
		b.run = run
		c.blocks[file] = append(c.blocks[file], b)
	}
	return sc.Err()
}

// hits lists the runs of m's killing suite (its package's own tests, and the conformance
// profiles) that executed m's position, and whether any of them measured the position at all.
func (c *coverage) hits(m Mutant) (runs map[string]bool, measured bool) {
	runs = map[string]bool{}
	for _, b := range c.blocks[m.File] {
		if _, conf := profileOf(b.run); !conf && b.run != m.Package {
			continue
		}
		after := m.Line > b.sl || (m.Line == b.sl && m.Col >= b.sc)
		before := m.Line < b.el || (m.Line == b.el && m.Col < b.ec)
		if after && before {
			measured = true
			if b.hit > 0 {
				runs[b.run] = true
			}
		}
	}
	return runs, measured
}

// executes reports whether the run labelled run executed m's position, or no block holds the
// position at all (a package-level declaration, evaluated on start).
func (c *coverage) executes(m Mutant, run string) bool {
	runs, measured := c.hits(m)
	return runs[run] || !measured
}

// with is the union of c's blocks and other's.
func (c *coverage) with(other *coverage) *coverage {
	u := &coverage{module: c.module, blocks: map[string][]block{}}
	for _, x := range []*coverage{c, other} {
		for f, bs := range x.blocks {
			u.blocks[f] = append(u.blocks[f], bs...)
		}
	}
	return u
}

// covers reports whether a test of m's killing suite executed m's position. A position in no
// block at all (a package-level declaration) counts as covered: it is evaluated on start.
func (c *coverage) covers(m Mutant) bool {
	runs, measured := c.hits(m)
	return len(runs) > 0 || !measured
}

// profiles lists, of all, the conformance profiles whose scenarios executed m's position: all of
// them for a position in no block (a package-level declaration, evaluated on start).
func (c *coverage) profiles(m Mutant, all []string) []string {
	runs, measured := c.hits(m)
	if !measured {
		return all
	}
	var out []string
	for _, p := range all {
		if runs[conformanceRun(p)] {
			out = append(out, p)
		}
	}
	return out
}
