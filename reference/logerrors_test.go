package reference

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/internal/hostio"
)

// TestInternalErrorsAreLoggedWithTheirErrorID: the turn hook and the gateway hook log every error
// with its errorId, with no hook configured and with one (which still receives it, once).
func TestInternalErrorsAreLoggedWithTheirErrorID(t *testing.T) {
	for _, hooked := range []bool{false, true} {
		var buf bytes.Buffer
		opt := Options{Logger: slog.New(slog.NewTextHandler(&buf, nil))}
		var turns []hostio.ErrorReport
		var internals []string
		if hooked {
			opt.Deps.OnError = func(r hostio.ErrorReport) { turns = append(turns, r) }
			opt.Gateway.OnError = func(id string, err error) { internals = append(internals, id+" "+err.Error()) }
		}
		logErrors(&opt)
		opt.Deps.OnError(hostio.ErrorReport{ErrorID: "err_turn", Error: "model: 404 model not found", ConversationID: "c_1", Turn: 2})
		opt.Gateway.OnError("err_gw", errors.New("disk full"))
		lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
		require.Len(t, lines, 2, buf.String())
		require.Contains(t, lines[0], "level=ERROR")
		require.Contains(t, lines[0], "errorId=err_turn")
		require.Contains(t, lines[0], `error="model: 404 model not found"`)
		require.Contains(t, lines[0], "conversation=c_1 turn=2")
		require.Contains(t, lines[1], "errorId=err_gw error=\"disk full\"")
		if hooked {
			require.Equal(t, []hostio.ErrorReport{{ErrorID: "err_turn", Error: "model: 404 model not found", ConversationID: "c_1", Turn: 2}}, turns)
			require.Equal(t, []string{"err_gw disk full"}, internals)
		}
	}
}
