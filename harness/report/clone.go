package report

import "maps"

// clone returns a deep copy of r: no slice, map or pointer of the result is shared with r.
func clone(r *Report) *Report {
	c := *r
	c.Target.Profiles = cloneStrings(r.Target.Profiles)
	c.Profiles = cloneSlice(r.Profiles)
	c.Requirements = cloneSlice(r.Requirements)
	for i := range c.Requirements {
		c.Requirements[i].Scenarios = cloneStrings(r.Requirements[i].Scenarios)
	}
	c.Warnings = cloneStrings(r.Warnings)
	if r.Baseline != nil {
		b := *r.Baseline
		b.Expected = cloneSlice(b.Expected)
		b.Stale = cloneSlice(b.Stale)
		b.Unexpected = cloneStrings(b.Unexpected)
		c.Baseline = &b
	}
	c.Scenarios = cloneSlice(r.Scenarios)
	for i := range c.Scenarios {
		sc := &c.Scenarios[i]
		sc.Tags = cloneStrings(sc.Tags)
		sc.Requirements = cloneStrings(sc.Requirements)
		if sc.Failure != nil {
			f := *sc.Failure
			sc.Failure = &f
		}
		sc.Steps = cloneSlice(sc.Steps)
		for j := range sc.Steps {
			st := &sc.Steps[j]
			if st.Table != nil {
				t := make([][]string, len(st.Table))
				for k, row := range st.Table {
					t[k] = cloneStrings(row)
				}
				st.Table = t
			}
		}
		sc.Notes = cloneStrings(sc.Notes)
		sc.Exchanges = cloneSlice(sc.Exchanges)
		for j := range sc.Exchanges {
			cloneExchange(&sc.Exchanges[j])
		}
	}
	c.Contract.Findings = cloneSlice(r.Contract.Findings)
	for i := range c.Contract.Findings {
		f := &c.Contract.Findings[i]
		f.Scenarios = cloneStrings(f.Scenarios)
		if f.Example != nil {
			ex := *f.Example
			cloneExchange(&ex)
			f.Example = &ex
		}
	}
	return &c
}

// cloneExchange replaces ex's slices and maps by copies.
func cloneExchange(ex *Exchange) {
	ex.RequestHeaders = cloneHeaders(ex.RequestHeaders)
	ex.ResponseHeaders = cloneHeaders(ex.ResponseHeaders)
	ex.Events = cloneSlice(ex.Events)
	ex.Violations = cloneStrings(ex.Violations)
}

func cloneSlice[T any](s []T) []T {
	if s == nil {
		return nil
	}
	out := make([]T, len(s))
	copy(out, s)
	return out
}

func cloneStrings(s []string) []string { return cloneSlice(s) }

func cloneHeaders(h map[string][]string) map[string][]string {
	if h == nil {
		return nil
	}
	out := make(map[string][]string, len(h))
	for k, v := range maps.All(h) {
		out[k] = cloneStrings(v)
	}
	return out
}

// normalized returns a deep copy of r in which every slice the JSON form always carries is
// non-nil, so report.json has [] where the schema wants an array and never null.
func normalized(r *Report) *Report {
	c := clone(r)
	nz := func(p *[]string) {
		if *p == nil {
			*p = []string{}
		}
	}
	nz(&c.Target.Profiles)
	if c.Profiles == nil {
		c.Profiles = []ProfileResult{}
	}
	if c.Scenarios == nil {
		c.Scenarios = []Scenario{}
	}
	if c.Requirements == nil {
		c.Requirements = []RequirementResult{}
	}
	for i := range c.Requirements {
		nz(&c.Requirements[i].Scenarios)
	}
	if b := c.Baseline; b != nil {
		if b.Expected == nil {
			b.Expected = []BaselineEntry{}
		}
		if b.Stale == nil {
			b.Stale = []BaselineEntry{}
		}
		nz(&b.Unexpected)
	}
	for i := range c.Contract.Findings {
		nz(&c.Contract.Findings[i].Scenarios)
	}
	for i := range c.Scenarios {
		sc := &c.Scenarios[i]
		nz(&sc.Tags)
		nz(&sc.Requirements)
		if sc.Steps == nil {
			sc.Steps = []Step{}
		}
		for j := range sc.Steps {
			for k := range sc.Steps[j].Table {
				nz(&sc.Steps[j].Table[k])
			}
		}
		for j := range sc.Exchanges {
			ex := &sc.Exchanges[j]
			for _, h := range []map[string][]string{ex.RequestHeaders, ex.ResponseHeaders} {
				for k, v := range h {
					if v == nil {
						h[k] = []string{}
					}
				}
			}
		}
	}
	return c
}
