package harness

import (
	"fmt"
	"io/fs"
	"sort"
	"strconv"

	"github.com/cucumber/godog"

	"github.com/loomcheck/loomcheck/features"
	"github.com/loomcheck/loomcheck/spec"
)

// ScenarioRef names one scenario of the features and what it proves.
type ScenarioRef struct {
	ID           string   `json:"id"`
	Name         string   `json:"name"`
	Profile      string   `json:"profile"`
	Requirements []string `json:"requirements"`
	Tags         []string `json:"tags"`
}

// Scenarios lists every scenario of fsys (nil: the embedded features), with its profile and the
// requirement ids its tags name, in file and line order.
//
//	refs, err := harness.Scenarios(nil)
func Scenarios(fsys fs.FS) ([]ScenarioRef, error) {
	if fsys == nil {
		fsys = features.FS
	}
	r := &runner{lines: map[string]int{}, keywords: map[string]string{}, features: map[string]string{}}
	if err := r.index(fsys); err != nil {
		return nil, err
	}
	suite := godog.TestSuite{Options: &godog.Options{FS: fsys, Paths: []string{"."}}}
	fts, err := suite.RetrieveFeatures()
	if err != nil {
		return nil, err
	}
	var out []ScenarioRef
	for _, ft := range fts {
		for _, p := range ft.Pickles {
			var tags []string
			for _, t := range p.Tags {
				tags = append(tags, t.Name)
			}
			line := 0
			for i := len(p.AstNodeIds) - 1; i >= 0 && line == 0; i-- {
				line = r.lines[p.AstNodeIds[i]]
			}
			profile, reqs, _ := meta(tags)
			out = append(out, ScenarioRef{ID: p.Uri + ":" + strconv.Itoa(line), Name: p.Name, Profile: profile, Requirements: reqs, Tags: tags})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return idLess(out[i].ID, out[j].ID) })
	return out, nil
}

// Trace maps every catalogued requirement to the scenarios that prove it, and reports the
// problems that break traceability: a requirement no scenario proves, a tag naming an id the
// catalogue lacks, a scenario without a profile, or a scenario whose profile differs from its
// requirements' profile.
//
//	matrix, problems, err := harness.Trace(cat, nil)
func Trace(cat *spec.Catalogue, fsys fs.FS) (map[string][]ScenarioRef, []string, error) {
	refs, err := Scenarios(fsys)
	if err != nil {
		return nil, nil, err
	}
	matrix := map[string][]ScenarioRef{}
	var problems []string
	for _, ref := range refs {
		if ref.Profile == "" {
			problems = append(problems, fmt.Sprintf("%s %q has no @profile tag", ref.ID, ref.Name))
		}
		if len(ref.Requirements) == 0 {
			problems = append(problems, fmt.Sprintf("%s %q proves no requirement (no @req tag)", ref.ID, ref.Name))
		}
		for _, id := range ref.Requirements {
			q, ok := cat.Get(id)
			if !ok {
				problems = append(problems, fmt.Sprintf("%s %q names %s, which the catalogue lacks", ref.ID, ref.Name, id))
				continue
			}
			if q.Profile != ref.Profile {
				problems = append(problems, fmt.Sprintf("%s %q is in profile %s but proves %s of profile %s", ref.ID, ref.Name, ref.Profile, id, q.Profile))
			}
			matrix[id] = append(matrix[id], ref)
		}
	}
	for _, q := range cat.Requirements {
		if len(matrix[q.ID]) == 0 {
			problems = append(problems, fmt.Sprintf("%s has no scenario", q.ID))
		}
	}
	return matrix, problems, nil
}
