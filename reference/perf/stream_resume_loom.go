package perf

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/loomcheck/loomcheck/reference/internal/stream"
	"github.com/loomcheck/loomcheck/reference/server"
)

// loomMessage is the message id of the frame the loom variant's conversation starts with: the
// frames it logs after each start are reactions to it.
const loomMessage = "m-resume"

// processRetry is the resuming client's schedule in the loom variant: at once, then every
// millisecond. A process killed takes its listening socket with it, so the client's tries fail
// until the next one listens; a schedule of 10 ms doubling would measure the client's waits
// rather than the restart.
func processRetry(time.Duration) time.Duration { return time.Millisecond }

// loomKill is a `loom` process: kill is a SIGKILL (waited for), start execs the binary again on
// the same data directory and address, and frame posts a reaction to the conversation's message,
// trying every millisecond until the new process answers: a frame it logs without waiting for
// the disk, as the in-process variant's status frame is.
type loomKill struct {
	ctx    context.Context
	argv   func(addr string) []string
	addr   string
	t      *target
	id     string
	on     bool
	cmd    *exec.Cmd
	exited chan struct{}
}

// start execs the binary; the first start listens on a port of the kernel's choosing and learns
// it from the serving line, the later ones listen on that same address.
func (k *loomKill) start() error {
	addr := k.addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	argv := k.argv(addr)
	cmd := exec.Command(argv[0], argv[1:]...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	k.cmd, k.exited = cmd, make(chan struct{})
	addrs := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if a, ok := server.ServingAddr(sc.Text()); ok {
				select {
				case addrs <- a:
				default:
				}
			}
		}
		_ = cmd.Wait()
		close(k.exited)
	}()
	if k.addr != "" {
		return nil
	}
	select {
	case k.addr = <-addrs:
		return nil
	case <-k.exited:
		return errors.New("loom ended before it printed its address")
	case <-time.After(stallGuard):
		k.kill()
		return errors.New("loom printed no serving line")
	}
}

func (k *loomKill) kill() {
	if k.cmd == nil {
		return
	}
	_ = k.cmd.Process.Signal(syscall.SIGKILL)
	<-k.exited
	k.cmd = nil
}

func (k *loomKill) frame() error {
	k.on = !k.on
	body := fmt.Sprintf(`{"message":%q,"emoji":"+1","on":%t}`, loomMessage, k.on)
	deadline := time.Now().Add(stallGuard)
	for {
		code, b, _, err := k.t.do(k.ctx, streamUser, http.MethodPost, "/sessions/"+k.id+"/reactions", body)
		switch {
		case err == nil && code == http.StatusAccepted:
			return nil
		case err == nil:
			return fmt.Errorf("POST reactions: status %d: %s", code, b)
		case time.Now().After(deadline):
			return fmt.Errorf("loom did not answer: %w", err)
		}
		select {
		case <-k.exited:
			return errors.New("loom ended")
		case <-time.After(time.Millisecond):
		}
	}
}

// newLoomKill builds cmd/loom and makes its data directory: a conversation whose session holds
// one message, made by an engine in this process and closed. It returns a *skipError when there
// is no module to build from.
func newLoomKill(e *env) (*loomKill, error) {
	goBin, mod, err := moduleDir(e)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(mod, "cmd", "loom")); err != nil {
		return nil, &skipError{fmt.Sprintf("no cmd/loom in %s", mod)}
	}
	bin := filepath.Join(e.dir, "loom")
	if err := build(e.ctx, goBin, mod, bin, "./cmd/loom"); err != nil {
		return nil, err
	}
	dir := filepath.Join(e.dir, "data-loom")
	t, eng, err := e.openEngine(dir, "", nil)
	if err != nil {
		return nil, err
	}
	c, err := t.newConv(e.ctx, streamUser)
	if err == nil {
		_, err = eng.Sessions().Append(e.ctx, streamWho, c.id, stream.Spec{Kind: stream.KindStatus, Message: loomMessage,
			Data: map[string]string{"state": "working"}})
	}
	if cerr := t.close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(engineConfig(dir, ""))
	if err != nil {
		return nil, err
	}
	cfg := dir + ".json"
	if err := os.WriteFile(cfg, b, 0o600); err != nil {
		return nil, err
	}
	tr := newTransport()
	k := &loomKill{ctx: e.ctx, id: c.id, argv: func(addr string) []string { return []string{bin, "--config", cfg, "--listen", addr} }}
	if err := k.start(); err != nil {
		return nil, err
	}
	k.t = &target{base: "http://" + k.addr, hc: &http.Client{Transport: tr}, tr: tr, stop: func() error { k.kill(); return nil }}
	return k, nil
}

// loomRow is the loom variant's row: its p50 beside the in-process engine's in the same round.
func loomRow(n int) Row {
	return Row{Measure: "kill to first resumed frame, p50, loom process", Unit: "ms", BaselineName: "the in-process engine, the same round",
		Goal: Goal{Text: "<= 2x in-process", Of: "ratio", AtMost: true, Bound: 2},
		Note: fmt.Sprintf("%d kills per run: a SIGKILL of `loom`, exec'd again at once on the same data directory and address; "+
			"the frame is a reaction posted every millisecond until the new process answers; the client resumes at once, then every millisecond "+
			"(no socket outlives the process)", n)}
}
