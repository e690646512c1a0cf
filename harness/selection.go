package harness

import (
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/cucumber/godog"
	messages "github.com/cucumber/messages/go/v34"
)

// index reads the features once for scenario lines, step keywords and feature names.
func (r *runner) index(fsys fs.FS) error {
	suite := godog.TestSuite{Options: &godog.Options{FS: fsys, Paths: []string{"."}, Tags: r.opt.Tags}}
	fts, err := suite.RetrieveFeatures()
	if err != nil {
		return harnessErr("read the features: %v", err)
	}
	for _, ft := range fts {
		doc := ft.GherkinDocument
		if doc == nil || doc.Feature == nil {
			continue
		}
		r.features[ft.Uri] = doc.Feature.Name
		r.total += len(ft.Pickles)
		for _, p := range ft.Pickles {
			if profile, _, _ := meta(tagNames(p)); r.claimed[profile] {
				r.judgeable++
			}
		}
		for _, c := range doc.Feature.Children {
			r.indexChild(c.Background, c.Scenario)
			if c.Rule != nil {
				for _, rc := range c.Rule.Children {
					r.indexChild(rc.Background, rc.Scenario)
				}
			}
		}
	}
	return nil
}

// selected refuses a filtered run that would judge nothing: a filter that selects no scenario,
// or only scenarios of profiles the system does not claim (or the run does not judge), is a
// usage error, never a vacuous pass.
func (r *runner) selected() error {
	filtered := r.opt.Tags != "" || len(r.opt.Profiles) > 0
	switch {
	case r.total == 0 && r.opt.Tags != "":
		if unknown := unknownRequirements(r.opt.Tags, r.cat); unknown != "" {
			return fmt.Errorf("%w: the tag filter %q selects no scenario: %s", ErrUsage, r.opt.Tags, unknown)
		}
		return fmt.Errorf("%w: the tag filter %q selects no scenario", ErrUsage, r.opt.Tags)
	case r.total == 0:
		return fmt.Errorf("%w: the features hold no scenario", ErrUsage)
	case filtered && len(r.claimed) == 0 && len(r.opt.Profiles) > 0:
		return fmt.Errorf("%w: the system claims none of the profiles asked for (--profile %s)", ErrUsage, strings.Join(r.opt.Profiles, ","))
	case filtered && len(r.claimed) == 0:
		return fmt.Errorf("%w: the system claims no profile, so a filtered run judges nothing", ErrUsage)
	case filtered && r.judgeable == 0:
		return fmt.Errorf("%w: the filters select %d scenarios, none of a profile this run judges (%s)", ErrUsage, r.total,
			strings.Join(slices.Sorted(maps.Keys(r.claimed)), ", "))
	}
	return nil
}

// indexChild records the step keywords and lines of a background and the lines of a scenario, of
// its steps and of its example rows.
func (r *runner) indexChild(bg *messages.Background, sc *messages.Scenario) {
	if bg != nil {
		for _, st := range bg.Steps {
			r.keywords[st.Id] = strings.TrimSpace(st.Keyword)
			r.lines[st.Id] = int(st.Location.Line)
		}
	}
	if sc == nil {
		return
	}
	r.lines[sc.Id] = int(sc.Location.Line)
	for _, st := range sc.Steps {
		r.keywords[st.Id] = strings.TrimSpace(st.Keyword)
		r.lines[st.Id] = int(st.Location.Line)
	}
	for _, ex := range sc.Examples {
		for _, row := range ex.TableBody {
			r.lines[row.Id] = int(row.Location.Line)
		}
	}
}

// scenarioID is "<feature file>:<line>" for a pickle.
func (r *runner) scenarioID(p *godog.Scenario) string {
	line := 0
	for i := len(p.AstNodeIds) - 1; i >= 0 && line == 0; i-- {
		line = r.lines[p.AstNodeIds[i]]
	}
	return p.Uri + ":" + strconv.Itoa(line)
}

func tagNames(p *godog.Scenario) []string {
	out := make([]string, 0, len(p.Tags))
	for _, t := range p.Tags {
		out = append(out, t.Name)
	}
	return out
}

// meta reads the profile and requirement ids a scenario's tags declare.
func meta(tags []string) (profile string, reqs []string, needs []string) {
	for _, t := range tags {
		switch {
		case strings.HasPrefix(t, "@profile:"):
			profile = strings.TrimPrefix(t, "@profile:")
		case strings.HasPrefix(t, "@req:"):
			reqs = append(reqs, strings.TrimPrefix(t, "@req:"))
		case t == "@crash" || t == "@configures" || t == "@fresh-system":
			needs = append(needs, strings.TrimPrefix(t, "@"))
		}
	}
	return profile, reqs, needs
}
