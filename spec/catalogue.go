package spec

import (
	_ "embed"
	"fmt"
	"regexp"
	"sort"

	"go.yaml.in/yaml/v4"

	"github.com/loomcheck/loomcheck/spec/sutconfig"
)

//go:embed requirements.yaml
var catalogueYAML []byte

// Levels of a requirement.
const (
	Must   = "MUST"
	Should = "SHOULD"
	May    = "MAY"
)

// Requirement is one normative statement the kit enforces.
type Requirement struct {
	// ID is <ADR><section>-<number>, for example ADR0122-D3-02.
	ID string `yaml:"id" json:"id"`
	// Level is MUST, SHOULD or MAY.
	Level string `yaml:"level" json:"level"`
	// Profile is the conformance profile the requirement belongs to.
	Profile string `yaml:"profile" json:"profile"`
	// Source names the ADR section the rule restates.
	Source string `yaml:"source" json:"source"`
	// Rule is the requirement in one or two sentences.
	Rule string `yaml:"rule" json:"rule"`
	// FirstCut names the bug of an earlier implementation the rule rules out, when the ADR
	// names one.
	FirstCut string `yaml:"firstCut,omitempty" json:"firstCut,omitempty"`
}

// Catalogue is the versioned requirement catalogue.
type Catalogue struct {
	Version      string        `yaml:"version" json:"version"`
	Profiles     []Profile     `yaml:"profiles" json:"profiles"`
	Requirements []Requirement `yaml:"requirements" json:"requirements"`
	byID         map[string]int
}

// Profile is a named set of requirements an implementation may claim.
type Profile struct {
	Name        string `yaml:"name" json:"name"`
	Description string `yaml:"description" json:"description"`
}

var reqID = regexp.MustCompile(`^ADR[0-9]{4}-[A-Z][A-Za-z0-9]*-[0-9]{2}$`)

// LoadCatalogue parses the embedded catalogue (spec/requirements.yaml) and checks it: unique
// well-formed ids, known levels and profiles, a rule and a source for each.
//
//	cat, err := spec.LoadCatalogue()
//	r, ok := cat.Get("ADR0122-D3-02")
func LoadCatalogue() (*Catalogue, error) {
	var c Catalogue
	if err := yaml.Unmarshal(catalogueYAML, &c); err != nil {
		return nil, fmt.Errorf("spec: requirements.yaml: %w", err)
	}
	if c.Version != sutconfig.Version {
		return nil, fmt.Errorf("spec: requirements.yaml has version %q, the kit is %q", c.Version, sutconfig.Version)
	}
	profiles := map[string]bool{}
	for _, p := range c.Profiles {
		profiles[p.Name] = true
	}
	c.byID = map[string]int{}
	for i, r := range c.Requirements {
		switch {
		case !reqID.MatchString(r.ID):
			return nil, fmt.Errorf("spec: requirement id %q is not of the form ADR0000-X0-00", r.ID)
		case r.Level != Must && r.Level != Should && r.Level != May:
			return nil, fmt.Errorf("spec: %s: level %q", r.ID, r.Level)
		case !profiles[r.Profile]:
			return nil, fmt.Errorf("spec: %s: unknown profile %q", r.ID, r.Profile)
		case r.Rule == "" || r.Source == "":
			return nil, fmt.Errorf("spec: %s: a rule and a source are required", r.ID)
		}
		if _, dup := c.byID[r.ID]; dup {
			return nil, fmt.Errorf("spec: %s appears twice", r.ID)
		}
		c.byID[r.ID] = i
	}
	return &c, nil
}

// Get returns the requirement with id.
func (c *Catalogue) Get(id string) (Requirement, bool) {
	i, ok := c.byID[id]
	if !ok {
		return Requirement{}, false
	}
	return c.Requirements[i], true
}

// ProfileNames lists the profiles, sorted.
func (c *Catalogue) ProfileNames() []string {
	out := make([]string, 0, len(c.Profiles))
	for _, p := range c.Profiles {
		out = append(out, p.Name)
	}
	sort.Strings(out)
	return out
}
