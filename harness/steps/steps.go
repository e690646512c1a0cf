// Package steps holds the kit's step vocabulary and what the steps share: the scenario's state,
// the client of a system (HTTP, SSE, WebSocket), the drivers that start, crash and restart it,
// and the support of each area. A feature features/<area>/<topic>.feature has its steps in
// <area>_<topic>.go here; steps several features share are in common_<name>.go.
//
// The runner (package harness) uses a small surface: a Run the scenarios share, a Scenario per
// pickle bound to godog with Register, Discover, and Vocabulary.
package steps

import (
	"encoding/json"
	"fmt"
	"net"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/cucumber/godog"

	"github.com/loomcheck/loomcheck/harness/world"
)

// Pieces of step patterns that several step files share.
const (
	// readerPat names a reader of a session stream and its transport: who, then WebSocket or SSE.
	readerPat = `(\w[\w' ]*?)'s (WebSocket|SSE) reader`
	// quotedPat is a quoted text with backslash escapes.
	quotedPat = `"((?:[^"\\]|\\.)*)"`
	// namePat is a quoted name without escapes.
	namePat = `"([^"]+)"`
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
// world, the client, the conversations, the last answer, the messages sent).
type (
	// setupSteps configure the system under test before it starts.
	setupSteps struct{ *scenario }

	// modelSteps script the world's model and read what it was asked.
	modelSteps struct {
		*scenario
		// holds are the model's answers that wait for a release, oldest first.
		holds []*world.Hold
		// calls numbers the tool calls scripted into the model's answers.
		calls int
		// slowPieces and slowPiece are how many pieces, of how many characters, the model
		// streams for the slow-reader steps.
		slowPieces, slowPiece int
	}

	// agentSteps script the tools and the memory of the agent and read their calls.
	agentSteps struct {
		*scenario
		// toolHolds are each tool's calls that wait for a release.
		toolHolds map[string][]*world.Hold
		// waitedUntil is, for a tool whose "has been waiting N ms" step ran, the moment that step
		// waited for: its release must follow closely for the scenario's timing to hold.
		waitedUntil map[string]time.Time
	}

	// runsSteps start, read, abort and cancel agent runs.
	runsSteps struct {
		*scenario
		// runID and runOwner are the last run started and who started it; options are the
		// options it was started with.
		runID, runOwner string
		options         map[string]any
		// ended is the run as it was read when it ended, and the body that said so.
		ended     *runView
		endedBody []byte
	}

	// writeBackSteps hold the memory's writes and judge what runs wrote back.
	writeBackSteps struct {
		*scenario
		// hold is where the memory's writes wait, once the writes were made to wait.
		hold *world.Hold
	}

	// limitsSteps configure and judge the response cache, the recorded response's cap and the
	// timeouts of runs.
	limitsSteps struct{ *scenario }
	// approvalsSteps answer what a parked run waits for: approval gates and human tools.
	approvalsSteps struct{ *scenario }

	// conversationSteps start conversations, send messages and wait for turns.
	conversationSteps struct{ *scenario }

	// editsSteps send messages that edit earlier ones.
	editsSteps struct{ *scenario }

	// historySteps read the history whole and page by page.
	historySteps struct {
		*scenario
		// remembered is the history as a step remembered it.
		remembered []entry
		// pages are the records of each page a paged reading got; shortNotDone is whether
		// one of them was short but not done; widest is the most records one page held.
		pages        []string
		shortNotDone bool
		widest       int
		// lastPage is the last single page read, and whether it said it was done.
		lastPage     []entry
		lastPageDone bool
	}

	// transcriptSteps judge what the transcript keeps of refused or odd messages.
	transcriptSteps struct{ *scenario }

	// durabilitySteps crash, stop, damage and restart the system.
	durabilitySteps struct {
		*scenario
		// down is whether the system is stopped or killed and not started again.
		down bool
		// damaged is what the damage steps did and saw.
		damaged damageState
		// replies are the replies the kit scripted for its turns, by turn number; prompts are the
		// user messages the model is sent for those turns whose prompt is not their text (an
		// edit's, its quote line first), by turn number.
		replies map[int64]string
		prompts map[int64]string
	}

	// accessSteps probe who may do what to whose conversation, the runtime door included.
	accessSteps struct {
		*scenario
		// injected is what the model of the last turn execution started through the runtime
		// door was told; injectedBy and injectedID are who started it, and its id.
		injected               string
		injectedBy, injectedID string
	}

	// budgetSteps script the summarizer and judge the context window.
	budgetSteps struct {
		*scenario
		// longTexts are the long messages the budget steps sent.
		longTexts []string
		// summary is the last summary the summarizer was scripted to give.
		summary string
	}

	// envelopesSteps put signed envelopes into the inbox and read them from the log.
	envelopesSteps struct {
		*scenario
		// doorSeq numbers the turn executions started through the runtime door.
		doorSeq int
		// oldKey is the signing key before the last rotation; captured is an envelope read
		// from the log, to be put in again.
		oldKey   string
		captured json.RawMessage
	}

	// gatewaySteps judge authentication, Host and CORS, bodies and limits.
	gatewaySteps struct {
		*scenario
		// held is what a conversation held when a step noted it.
		held *holding
		// answers are the answers of a step that sends more than one request.
		answers []*response
	}

	// liveSteps open, read, resume and close event streams.
	liveSteps struct {
		*scenario
		// lastStream is the last stream a step opened, open or refused.
		lastStream *stream
		// replayed are the events of the last resumed stream.
		replayed []sseEvent
		// slowConn is the raw connection of a stream nobody reads; slowEvents and slowEnd
		// are what was read from it once read again, and how it ended.
		slowConn   net.Conn
		slowEvents []sseEvent
		slowEnd    string
	}

	// contractSteps check every exchange against spec/openapi.yaml.
	contractSteps struct{ *scenario }

	// edgeSteps judge the edges of a connection: deadlines, stalls, caps, held identities.
	edgeSteps struct {
		*scenario
		// edge is what the connection steps keep (the stalled connection, the held ones).
		edge *edgeState
		// identityHold holds the identity service's answers for one token.
		identityHold *world.Hold
	}

	// streamSteps open, follow and judge session streams (profile stream).
	streamSteps struct {
		*scenario
		// opened is the last open answered with a ticket, and who asked for it.
		opened   *openAnswer
		openedBy string
		openedAt time.Time // when the last open's answer arrived
		openSent time.Time // when the last open answered with a ticket was sent
		// openedArgs are the last open's who, conversation, from and device, to open again.
		openedArgs [4]string
		// readers are the scenario's readers of session streams, by who and transport.
		readers map[string]*follower
		// paced are the model's paced answers, oldest first.
		paced []*pacedAnswer
	}

	// sharedSteps judge shared conversations: participants, clearances, visibility.
	sharedSteps struct {
		*scenario
		// partChanges are the participant changes this scenario made and the system
		// accepted, oldest first: op, then the wire identities of whom and by whom.
		partChanges []partChange
	}
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
	nodes        *nodesSteps
	access       *accessSteps
	budget       *budgetSteps
	envelopes    *envelopesSteps
	gateway      *gatewaySteps
	live         *liveSteps
	contract     *contractSteps
	edge         *edgeSteps
	shared       *sharedSteps
	runs         *runsSteps
	writeBack    *writeBackSteps
	limits       *limitsSteps
	failures     *failuresSteps
	approvals    *approvalsSteps
	recall       *recallSteps
	stream       *streamSteps
	steer        *steerSteps
	group        *groupSteps
	threads      *threadsSteps
	streamLimits *streamLimitsSteps
}

// newAreas makes the step areas of s, each with its state empty.
func newAreas(s *scenario) areas {
	return areas{
		setup:        &setupSteps{scenario: s},
		model:        &modelSteps{scenario: s},
		agent:        &agentSteps{scenario: s, toolHolds: map[string][]*world.Hold{}, waitedUntil: map[string]time.Time{}},
		conversation: &conversationSteps{scenario: s},
		edits:        &editsSteps{scenario: s},
		history:      &historySteps{scenario: s},
		transcript:   &transcriptSteps{scenario: s},
		durability:   &durabilitySteps{scenario: s},
		nodes:        &nodesSteps{scenario: s, served: map[string]string{}, before: map[string][]entry{}},
		access:       &accessSteps{scenario: s},
		budget:       &budgetSteps{scenario: s},
		envelopes:    &envelopesSteps{scenario: s},
		gateway:      &gatewaySteps{scenario: s},
		live:         &liveSteps{scenario: s},
		contract:     &contractSteps{scenario: s},
		edge:         &edgeSteps{scenario: s},
		shared:       &sharedSteps{scenario: s},
		runs:         &runsSteps{scenario: s},
		writeBack:    &writeBackSteps{scenario: s},
		limits:       &limitsSteps{scenario: s},
		failures:     &failuresSteps{scenario: s},
		approvals:    &approvalsSteps{scenario: s},
		recall:       &recallSteps{scenario: s},
		stream:       &streamSteps{scenario: s, readers: map[string]*follower{}},
		steer:        &steerSteps{scenario: s},
		group:        &groupSteps{scenario: s, texts: map[string]string{}},
		threads:      &threadsSteps{scenario: s, bound: map[string]string{}, pairs: map[string]threadPair{}},
		streamLimits: &streamLimitsSteps{scenario: s},
	}
}

// area is one area of the vocabulary, named as the feature files it serves.
type area struct {
	name  string
	steps []stepDef
}

// vocabulary is every area of s's steps, in a fixed order: one per step file, named as the file
// (harness/steps/<name>.go), a feature's file as the feature (features/<area>/<topic>.feature).
func (a areas) vocabulary() []area {
	return []area{
		{"agent_approvals", agentApprovalsVocabulary(a)},
		{"agent_example", agentExampleVocabulary(a)},
		{"agent_failures", agentFailuresVocabulary(a)},
		{"agent_grants", agentGrantsVocabulary(a)},
		{"agent_limits", agentLimitsVocabulary(a)},
		{"agent_loop", agentLoopVocabulary(a)},
		{"agent_memory", agentMemoryVocabulary(a)},
		{"agent_recall", agentRecallVocabulary(a)},
		{"agent_runs", agentRunsVocabulary(a)},
		{"agent_single_frame", agentSingleFrameVocabulary(a)},
		{"agent_terminal_failures", agentTerminalFailuresVocabulary(a)},
		{"agent_turn_failures", agentTurnFailuresVocabulary(a)},
		{"common_agent", commonAgentVocabulary(a)},
		{"common_conversation", commonConversationVocabulary(a)},
		{"common_envelopes", commonEnvelopesVocabulary(a)},
		{"common_model", commonModelVocabulary(a)},
		{"common_setup", commonSetupVocabulary(a)},
		{"common_stream", commonStreamVocabulary(a)},
		{"common_threads", commonThreadsVocabulary(a)},
		{"conversation_access", conversationAccessVocabulary(a)},
		{"conversation_barge_in", conversationBargeInVocabulary(a)},
		{"conversation_budget", conversationBudgetVocabulary(a)},
		{"conversation_dialogue", conversationDialogueVocabulary(a)},
		{"conversation_edits", conversationEditsVocabulary(a)},
		{"conversation_history", conversationHistoryVocabulary(a)},
		{"conversation_transcript", conversationTranscriptVocabulary(a)},
		{"durability_carry", durabilityCarryVocabulary(a)},
		{"durability_crash", durabilityCrashVocabulary(a)},
		{"durability_nodes", durabilityNodesVocabulary(a)},
		{"durability_nodes_death", durabilityNodesDeathVocabulary(a)},
		{"envelopes_signed", envelopesSignedVocabulary(a)},
		{"envelopes_replay", envelopesReplayVocabulary(a)},
		{"gateway_contract", gatewayContractVocabulary(a)},
		{"gateway_edge", gatewayEdgeVocabulary(a)},
		{"gateway_http", gatewayHTTPVocabulary(a)},
		{"gateway_http_streams", gatewayHTTPStreamsVocabulary(a)},
		{"gateway_live", gatewayLiveVocabulary(a)},
		{"shared_edit_classes", sharedEditClassesVocabulary(a)},
		{"shared_participants", sharedParticipantsVocabulary(a)},
		{"shared_views", sharedViewsVocabulary(a)},
		{"stream_frames", streamFramesVocabulary(a)},
		{"stream_group", streamGroupVocabulary(a)},
		{"stream_handle", streamHandleVocabulary(a)},
		{"stream_limits", streamLimitsVocabulary(a)},
		{"stream_private", streamPrivateVocabulary(a)},
		{"stream_queue", streamQueueVocabulary(a)},
		{"stream_restart", streamRestartVocabulary(a)},
		{"stream_roles", streamRolesVocabulary(a)},
		{"stream_resume", streamResumeVocabulary(a)},
		{"stream_steering", streamSteeringVocabulary(a)},
		{"stream_threads", streamThreadsVocabulary(a)},
		{"stream_tickets", streamTicketsVocabulary(a)},
		{"threads_durability", threadsDurabilityVocabulary(a)},
		{"threads_lifetime", threadsLifetimeVocabulary(a)},
		{"threads_limits", threadsLimitsVocabulary(a)},
		{"threads_pause", threadsPauseVocabulary(a)},
		{"threads_receiving", threadsReceivingVocabulary(a)},
		{"threads_roots", threadsRootsVocabulary(a)},
		{"threads_sending", threadsSendingVocabulary(a)},
		{"threads_stop", threadsStopVocabulary(a)},
		{"threads_visibility", threadsVisibilityVocabulary(a)},
		{"threads_wire", threadsWireVocabulary(a)},
	}
}

// register binds to this scenario the steps of the vocabulary that match one of its step
// texts, in the vocabulary's order, with the patterns compiled once per process. godog tries
// every bound pattern against every step twice (to find it, and to tell it is not undefined),
// so binding the whole vocabulary cost more than running most scenarios; a step that matches
// two patterns still binds both (godog then reports it ambiguous), and one that matches none
// binds nothing (undefined), as before. A compiled regular expression is safe for concurrent
// use, so scenarios running at once share them.
func (s *scenario) register(sc *godog.ScenarioContext, texts []string) {
	s.areas = newAreas(s)
	compiled := stepPatterns()
	want := map[string]bool{}
	for _, t := range texts {
		for _, p := range matchingPatterns(t) {
			want[p] = true
		}
	}
	for _, a := range s.areas.vocabulary() {
		for _, d := range a.steps {
			re := compiled[d.pattern]
			if re == nil {
				panic(fmt.Sprintf("step %q of %s is not in the compiled vocabulary", d.pattern, a.name))
			}
			if want[d.pattern] {
				sc.Step(re, d.fn)
			}
		}
	}
}

// stepPatterns is every pattern of the vocabulary, compiled, by its text. It is built on first
// use and then shared; a pattern that does not compile panics there, as Vocabulary does.
var stepPatterns = sync.OnceValue(func() map[string]*regexp.Regexp {
	compiled := map[string]*regexp.Regexp{}
	for _, st := range Vocabulary() {
		if _, done := compiled[st.Pattern]; !done {
			compiled[st.Pattern] = regexp.MustCompile(st.Pattern)
		}
	}
	return compiled
})

// matchedBy remembers, for each step text seen, the patterns of the vocabulary that match it:
// the same texts recur across scenarios.
var matchedBy sync.Map // string -> []string

// matchingPatterns is every pattern of the vocabulary that matches text.
func matchingPatterns(text string) []string {
	if v, ok := matchedBy.Load(text); ok {
		return v.([]string)
	}
	var out []string
	for p, re := range stepPatterns() {
		if prefix, _ := re.LiteralPrefix(); !strings.HasPrefix(text, prefix) {
			continue
		}
		if re.MatchString(text) {
			out = append(out, p)
		}
	}
	matchedBy.Store(text, out)
	return out
}

// Step is one step of the kit's vocabulary, as `loomcheck steps` lists it.
type Step struct {
	// Pattern is the regular expression a step's text must match.
	Pattern string `json:"pattern"`
	// Area is the step file the step lives in, harness/steps/<area>.go: <area>_<topic> for the
	// steps of features/<area>/<topic>.feature, common_<name> for steps several features share.
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
