package record_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/internal/conversation/record"
	"github.com/loomcheck/loomcheck/reference/kernel"
)

// TurnsOf reads the count of accepted turns where a log holds one, and says exactly what it found:
// each case compares the whole answer (count, found, legacy).
func TestTurnsOfEachKindOfEvent(t *testing.T) {
	decision := func(id, value string) kernel.LogEvent {
		return kernel.LogEvent{Kind: "decision", Decision: &kernel.Decision{ID: id, Value: json.RawMessage(value)}}
	}
	start := func(input string) kernel.LogEvent {
		return kernel.LogEvent{Kind: "started", Start: &kernel.Start{Input: json.RawMessage(input)}}
	}
	type answer struct {
		n             int64
		found, legacy bool
	}
	for _, c := range []struct {
		name string
		ev   kernel.LogEvent
		gen  int64
		want answer
	}{
		{"a verdict with its count", decision("conv#o3:verify", `{"ok":true,"turns":2}`), 0, answer{2, true, false}},
		{"a record with its count", decision("conv#o3:user", `{"rec":{"ord":5},"turns":3}`), 0, answer{3, true, false}},
		{"a count of zero", decision("conv#o1:verify", `{"ok":false,"turns":0}`), 0, answer{0, true, false}},
		{"a verdict written before the count", decision("conv#o3:verify", `{"ok":true}`), 0, answer{0, false, true}},
		{"a record written before the count", decision("conv#o3:reply", `{"rec":{"ord":6}}`), 0, answer{0, false, true}},
		{"another decision of the dialogue", decision("conv#fit:3", `{"ok":true,"keep":2}`), 0, answer{0, false, false}},
		{"a decision of another flow", decision("loop#3", `{"turns":9}`), 0, answer{0, false, false}},
		{"an empty value", decision("conv#o3:verify", ``), 0, answer{0, false, false}},
		{"a value that is not an object", decision("conv#o3:verify", `[{"turns":9}]`), 0, answer{0, false, false}},
		{"a value that does not parse", decision("conv#o3:verify", `{"turns":`), 0, answer{0, false, false}},
		{"the start of generation 0", start(`{"v":1,"seq":8}`), 0, answer{0, true, false}},
		{"a carry with its count", start(`{"seq":7}`), 2, answer{7, true, false}},
		{"a carry without the count", start(`{"window":[]}`), 1, answer{0, false, true}},
		{"a carry that does not parse", start(`{"seq":`), 1, answer{0, false, true}},
		{"any other event", kernel.LogEvent{Kind: "consumed", Data: json.RawMessage(`{"turns":4}`)}, 0, answer{0, false, false}},
	} {
		t.Run(c.name, func(t *testing.T) {
			n, found, legacy := record.TurnsOf(c.ev, c.gen)
			require.Equal(t, c.want, answer{n, found, legacy})
		})
	}
}
