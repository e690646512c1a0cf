package steps

import (
	"testing"
	"time"
)

// TestJudgeHeartbeats: heartbeats on a schedule of one per interval pass however the loaded
// machine delays single beats within the slack; beats too often, too rarely, drifting or long
// after the stream went idle fail.
func TestJudgeHeartbeats(t *testing.T) {
	const period = 200 * time.Millisecond
	n := heartbeatIntervals(period)
	if n != 8 {
		t.Fatalf("heartbeatIntervals(%s) = %d, want 8 (a window of four times the slack)", period, n)
	}
	if got := heartbeatIntervals(15 * time.Second); got != 3 {
		t.Fatalf("heartbeatIntervals(15s) = %d, want 3", got)
	}
	idle := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ms := func(d int) time.Duration { return time.Duration(d) * time.Millisecond }
	// every: n+1 beats, the first first after idle, one per step.
	every := func(first, step time.Duration) []time.Time {
		at := make([]time.Time, n+1)
		for i := range at {
			at[i] = idle.Add(first + time.Duration(i)*step)
		}
		return at
	}
	// delayed: on schedule, but beat i arrives late.
	delayed := func(late map[int]time.Duration) []time.Time {
		at := every(period, period)
		for i, d := range late {
			at[i] = at[i].Add(d)
		}
		return at
	}
	// reset: a timer restarted after each beat sent, each send late.
	reset := func(late time.Duration) []time.Time {
		at := make([]time.Time, n+1)
		t := idle
		for i := range at {
			t = t.Add(period + late)
			at[i] = t
		}
		return at
	}
	for _, c := range []struct {
		name string
		idle time.Time
		at   []time.Time
		ok   bool
	}{
		{"on time", idle, every(period, period), true},
		{"one beat 84 ms late, the next on time 116 ms after it", idle, delayed(map[int]time.Duration{3: ms(84)}), true},
		{"one beat held back by the whole slack", idle, delayed(map[int]time.Duration{4: heartbeatSlack}), true},
		{"the first beat late by the whole slack", idle, delayed(map[int]time.Duration{0: heartbeatSlack}), true},
		{"several beats late by different amounts", idle, delayed(map[int]time.Duration{1: ms(150), 2: ms(30), 5: ms(390), 8: ms(10)}), true},
		{"a ticker started at the open, not at the last frame", idle, every(ms(40), period), true},
		{"a timer restarted after each beat, each sent 40 ms late", idle, reset(ms(40)), true},
		{"no frame before the heartbeats", time.Time{}, every(ms(5000), period), true},
		{"one beat held back beyond the slack", idle, delayed(map[int]time.Duration{4: heartbeatSlack + ms(20)}), false},
		{"the first beat too long after idle", idle, every(period+heartbeatSlack+ms(1), period), false},
		{"every half interval", idle, every(period/2, period/2), false},
		{"every 0.7 intervals", idle, every(ms(140), ms(140)), false},
		{"every two intervals", idle, every(2*period, 2*period), false},
		{"every 1.3 intervals", idle, every(ms(260), ms(260)), false},
		{"a timer restarted after each beat, each sent 60 ms late", idle, reset(ms(60)), false},
	} {
		got, want := judgeHeartbeats(c.idle, c.at, period)
		if (got == "") != c.ok {
			t.Errorf("%s: judged %q (want %q), expected it to pass: %v", c.name, got, want, c.ok)
		}
		if got != "" && want == "" {
			t.Errorf("%s: a failure %q that says nothing of what was expected", c.name, got)
		}
	}
}
