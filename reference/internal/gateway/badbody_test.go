package gateway_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// TestABodyThatCannotBeReadIsRefusedAndActedOnNever: a turn whose body breaks off in a malformed
// chunk (not a size problem) is answered 400 and nothing of it reaches the conversation: the
// next good turn's history holds that turn alone.
func TestABodyThatCannotBeReadIsRefusedAndActedOnNever(t *testing.T) {
	be := openBenchEngine(t, instant())
	if code := postBrokenBody(t, be, "/conversations/"+be.conv+"/turns"); code != http.StatusBadRequest {
		t.Fatalf("a body that cannot be read: status %d, want 400", code)
	}

	be.sendTurn("hello")
	be.awaitReply(1, nil)
	req, _ := http.NewRequest(http.MethodGet, be.srv.URL+"/conversations/"+be.conv+"/history", nil)
	req.Header.Set("Authorization", "Bearer "+benchToken)
	hr, err := be.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer hr.Body.Close()
	var page loomtype.Page
	if err := json.NewDecoder(hr.Body).Decode(&page); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range page.Entries {
		text := ""
		if e.Text != nil {
			text = *e.Text
		}
		got = append(got, fmt.Sprintf("%d %s %s %q", e.Turn, e.Role, e.Status, text))
	}
	want := []string{`1 user accepted "hello"`, `1 assistant complete "ok"`}
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Fatalf("history: got %v, want exactly %v", got, want)
	}
}

// TestAStartWhoseBodyCannotBeReadStartsNothing: a start may have no body at all (the system then
// picks the id), so a start whose body breaks off must not be taken for one without a body: it is
// answered 400 and nothing of it is written.
func TestAStartWhoseBodyCannotBeReadStartsNothing(t *testing.T) {
	be := openBenchEngine(t, instant())
	before := be.eng.DurableWrites()
	if code := postBrokenBody(t, be, "/conversations"); code != http.StatusBadRequest {
		t.Fatalf("a start whose body cannot be read: status %d, want 400", code)
	}
	// The answer's body ends when the handler returns, so anything it went on to do is written.
	// The caller's POST allowance, taken before the body is read (spec/http.md:
	// gateway.postsPerMinute counts every POST), is counted in memory by an engine alone on its
	// store: nothing is written.
	if got := be.eng.DurableWrites(); got != before {
		t.Fatalf("durable writes: %d before the refused start, %d after it; want none", before, got)
	}
}

// postBrokenBody posts to path a JSON body whose chunked encoding breaks off in a malformed
// chunk (not a size problem), reads the whole answer and returns its status.
func postBrokenBody(t *testing.T, be *benchEngine, path string) int {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(be.srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: example\r\nAuthorization: Bearer %s\r\n"+
		"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n", path, benchToken)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}
