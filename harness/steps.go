package harness

import (
	"fmt"
	"regexp"

	"github.com/cucumber/godog"
)

// stepDef is one step of the vocabulary: the pattern a feature's step text must match, the
// method that runs it, and one line saying what it does.
type stepDef struct {
	pattern string
	fn      any
	meaning string
}

// Each area's steps are named methods of a small struct that holds what those steps keep
// between them; all of them see the scenario they belong to (the system under test, the
// world, the client, the conversations, the last answer).
type (
	setupSteps        struct{ *scenario }
	modelSteps        struct{ *scenario }
	agentSteps        struct{ *scenario }
	conversationSteps struct{ *scenario }
	editsSteps        struct{ *scenario }
	historySteps      struct{ *scenario }
	transcriptSteps   struct{ *scenario }
	durabilitySteps   struct{ *scenario }
	accessSteps       struct{ *scenario }
	budgetSteps       struct{ *scenario }
	envelopesSteps    struct{ *scenario }
	gatewaySteps      struct{ *scenario }
	liveSteps         struct{ *scenario }
	contractSteps     struct{ *scenario }
	edgeSteps         struct{ *scenario }
	sharedSteps       struct{ *scenario }
)

// areas are the step areas of one scenario, each with its own state.
type areas struct {
	setup        *setupSteps
	model        *modelSteps
	agent        *agentSteps
	conversation *conversationSteps
	edits        *editsSteps
	history      *historySteps
	transcript   *transcriptSteps
	durability   *durabilitySteps
	access       *accessSteps
	budget       *budgetSteps
	envelopes    *envelopesSteps
	gateway      *gatewaySteps
	live         *liveSteps
	contract     *contractSteps
	edge         *edgeSteps
	shared       *sharedSteps
}

// newAreas makes the step areas of s, each with its state empty.
func newAreas(s *scenario) areas {
	return areas{
		setup:        &setupSteps{scenario: s},
		model:        &modelSteps{scenario: s},
		agent:        &agentSteps{scenario: s},
		conversation: &conversationSteps{scenario: s},
		edits:        &editsSteps{scenario: s},
		history:      &historySteps{scenario: s},
		transcript:   &transcriptSteps{scenario: s},
		durability:   &durabilitySteps{scenario: s},
		access:       &accessSteps{scenario: s},
		budget:       &budgetSteps{scenario: s},
		envelopes:    &envelopesSteps{scenario: s},
		gateway:      &gatewaySteps{scenario: s},
		live:         &liveSteps{scenario: s},
		contract:     &contractSteps{scenario: s},
		edge:         &edgeSteps{scenario: s},
		shared:       &sharedSteps{scenario: s},
	}
}

// area is one area of the vocabulary, named as the feature files it serves.
type area struct {
	name  string
	steps []stepDef
}

// vocabulary is every area of s's steps, in a fixed order.
func (a areas) vocabulary() []area {
	return []area{
		{"setup", a.setup.steps()},
		{"model", a.model.steps()},
		{"agent", a.agent.steps()},
		{"conversation", a.conversation.steps()},
		{"edits", a.edits.steps()},
		{"history", a.history.steps()},
		{"transcript", a.transcript.steps()},
		{"durability", a.durability.steps()},
		{"access", a.access.steps()},
		{"budget", a.budget.steps()},
		{"envelopes", a.envelopes.steps()},
		{"gateway", a.gateway.steps()},
		{"live", a.live.steps()},
		{"contract", a.contract.steps()},
		{"edge", a.edge.steps()},
		{"shared", a.shared.steps()},
	}
}

// register binds every step of the vocabulary to this scenario.
func (s *scenario) register(sc *godog.ScenarioContext) {
	s.areas = newAreas(s)
	for _, a := range s.areas.vocabulary() {
		for _, d := range a.steps {
			sc.Step(d.pattern, d.fn)
		}
	}
}

// Step is one step of the kit's vocabulary, as `loomcheck steps` lists it.
type Step struct {
	// Pattern is the regular expression a step's text must match.
	Pattern string `json:"pattern"`
	// Area is the group of features the step serves (its file harness/steps_<area>.go).
	Area string `json:"area"`
	// Meaning says in one line what the step does or expects.
	Meaning string `json:"meaning"`
}

// Vocabulary is every step the kit defines, area by area in a fixed order; each pattern is a
// valid regular expression. It runs nothing and is safe for concurrent use.
//
//	for _, st := range harness.Vocabulary() {
//		fmt.Printf("%-12s %s\n", st.Area, st.Pattern)
//	}
func Vocabulary() []Step {
	s := &scenario{}
	s.areas = newAreas(s)
	var out []Step
	for _, a := range s.areas.vocabulary() {
		for _, d := range a.steps {
			if _, err := regexp.Compile(d.pattern); err != nil {
				panic(fmt.Sprintf("step %q of %s: %v", d.pattern, a.name, err))
			}
			out = append(out, Step{Pattern: d.pattern, Area: a.name, Meaning: d.meaning})
		}
	}
	return out
}
