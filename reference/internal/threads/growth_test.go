package threads_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/loomcheck/loomcheck/reference/internal/threads"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/model"
)

// peerThread has the peer send n texts of size bytes in one thread, each taken by a turn of its
// own, and returns the bytes the store's rows hold afterwards.
func peerThread(t *testing.T, n, size int) int64 {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	fm := fakeModel(func(m []model.Message) model.Response {
		return model.Response{Content: "noted " + strconv.Itoa(len(m)), FinishReason: model.FinishStop}
	})
	b := openBox(t, dir, threads.Config{Roles: []threads.Role{{Name: "scout"}}, Members: []loomtype.Identity{dana},
		Connections: []threads.Connection{{ID: "hq", URL: "http://127.0.0.1:1", Send: "to-hq", Accept: "from-hq", Owner: olga,
			Budget: int64(n+1) * int64(size), Rate: 1 << 20}}, Provider: fm})
	th := "t_growthgrowthgrowth"
	for i := 1; i <= n; i++ {
		body, _ := json.Marshal(threads.Text{V: 1, Thread: th, Message: "m" + strconv.Itoa(i), From: "planner", To: "scout",
			Text: fmt.Sprintf("%06d", i) + strings.Repeat("x", size-6)})
		if _, err := b.svc.Receive(ctx, "from-hq", body); err != nil {
			t.Fatalf("text %d: %v", i, err)
		}
		eventually(t, "turn "+strconv.Itoa(i), func() bool {
			v, err := b.svc.Find(ctx, dana, "hq", th)
			return err == nil && len(v.Turns) == i && v.Turns[i-1].Status == "completed"
		})
	}
	b.close()
	return storedBytes(t, dir)
}

// storedBytes sums the bytes of the rows of the store in dir: keys, values, streams and events.
func storedBytes(t *testing.T, dir string) int64 {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "loom.db")+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var total int64
	for _, q := range []string{
		`SELECT COALESCE(SUM(length(key) + length(val)), 0) FROM meta`,
		`SELECT COALESCE(SUM(length(stream) + length(kind) + COALESCE(length(data), 0)), 0) FROM events`,
		`SELECT COALESCE(SUM(length(scope) + length(key)), 0) FROM remembered`,
	} {
		var v int64
		if err := db.QueryRow(q).Scan(&v); err != nil {
			t.Fatal(err)
		}
		total += v
	}
	return total
}

// growthUnderRace is how many texts or turns the growth tests send first (then twice as many)
// under the race detector, where a turn costs about ten times the CPU it costs without it. Ten
// still tells linear growth from quadratic: a turn that stored every earlier text again would
// store about 3.8 times as much after 20 as after 10, where the bound is 2.3. The full counts run
// without the race detector in the corpus pass (CORPUS_TESTS in the Makefile; the test-corpus
// step of .ci/run).
const growthUnderRace = 10

// TestStorageGrowsLinearlyWithAPeerThread: a turn's input refers to the texts already stored
// and its context is a bounded window, so twice the texts take about twice the bytes, not four
// times as many.
func TestStorageGrowsLinearlyWithAPeerThread(t *testing.T) {
	if testing.Short() {
		t.Skip("sends a hundred texts")
	}
	n, size := 40, 4096
	if raceEnabled {
		n = growthUnderRace
	}
	if v, err := strconv.Atoi(os.Getenv("THREADS_GROWTH_N")); err == nil && v > 0 {
		n = v
	}
	if v, err := strconv.Atoi(os.Getenv("THREADS_GROWTH_SIZE")); err == nil && v > 0 {
		size = v
	}
	one := peerThread(t, n, size)
	two := peerThread(t, 2*n, size)
	t.Logf("%d texts of %d bytes: %d bytes stored; %d texts: %d bytes (ratio %.2f)", n, size, one, 2*n, two, float64(two)/float64(one))
	if float64(two) > 2.3*float64(one) {
		t.Fatalf("stored bytes grow faster than the texts: %d after %d texts, %d after %d", one, n, two, 2*n)
	}
}

// personConversation has dana say n texts of size bytes to the role, each turn waited for, and
// returns the bytes the store's rows hold afterwards and the last request to the model.
func personConversation(t *testing.T, n, size int) (int64, []model.Message) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	fm := fakeModel(func(m []model.Message) model.Response {
		return model.Response{Content: "answer " + strings.TrimRight(lastUser(m)[:8], "x"), FinishReason: model.FinishStop}
	})
	b := openBox(t, dir, threads.Config{Roles: []threads.Role{{Name: "planner", Prompt: "P"}}, Provider: fm})
	for i := 1; i <= n; i++ {
		text := fmt.Sprintf("text %03d", i) + strings.Repeat("x", max(0, size-8))
		if _, _, err := b.svc.Converse(ctx, dana, "planner", text); err != nil {
			t.Fatalf("turn %d: %v", i, err)
		}
		eventually(t, "turn "+strconv.Itoa(i), func() bool {
			v, err := b.svc.Conversation(ctx, dana, "planner")
			return err == nil && len(v.Turns) == i && v.Turns[i-1].Status == "completed"
		})
	}
	b.close()
	msgs := fm.Messages()
	return storedBytes(t, dir), msgs[len(msgs)-1]
}

// TestAPersonsConversationSendsTheWindowAndGrowsLinearly: the 11th turn of a person's
// conversation with a role is sent the newest 8 earlier turns and the note of the 2 left out, and
// twice the turns take about twice the bytes.
func TestAPersonsConversationSendsTheWindowAndGrowsLinearly(t *testing.T) {
	_, last := personConversation(t, 11, 8)
	want := msgs("system", "P", "system", "Turns 1 to 2 of this conversation are left out.")
	for i := 3; i <= 10; i++ {
		want = append(want, msgs("user", fmt.Sprintf("text %03d", i), "assistant", fmt.Sprintf("answer text %03d", i))...)
	}
	want = append(want, msgs("user", "text 011")...)
	if !reflect.DeepEqual(last, want) {
		t.Fatalf("request of turn 11:\n got %#v\nwant %#v", last, want)
	}
	if testing.Short() {
		return
	}
	n, size := 20, 16000
	if raceEnabled {
		n = growthUnderRace
	}
	if v, err := strconv.Atoi(os.Getenv("THREADS_GROWTH_N")); err == nil && v > 0 {
		n = v
	}
	one, _ := personConversation(t, n, size)
	two, _ := personConversation(t, 2*n, size)
	t.Logf("%d turns of %d bytes: %d bytes stored; %d turns: %d bytes (ratio %.2f)", n, size, one, 2*n, two, float64(two)/float64(one))
	if float64(two) > 2.3*float64(one) {
		t.Fatalf("stored bytes grow faster than the turns: %d after %d turns, %d after %d", one, n, two, 2*n)
	}
}
