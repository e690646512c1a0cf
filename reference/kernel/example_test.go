package kernel_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/store/sqlite"
)

// openExample opens a kernel with flows on a fresh store; close it with the returned function.
func openExample(flows map[string]kernel.Flow) (*kernel.Kernel, func()) {
	dir, _ := os.MkdirTemp("", "kernel-example")
	st, err := sqlite.Open(context.Background(), filepath.Join(dir, "loom.db"), sqlite.Options{})
	if err != nil {
		panic(err)
	}
	k, err := kernel.Open(context.Background(), st, kernel.Options{Flows: flows})
	if err != nil {
		panic(err)
	}
	return k, func() { k.Close(); st.Close(); os.RemoveAll(dir) }
}

func ExampleKernel_Cancel() {
	waiting := make(chan struct{})
	flows := map[string]kernel.Flow{"worker": func(c *kernel.Context, _ json.RawMessage) (json.RawMessage, error) {
		_, err := c.Execute("long-call", func(ctx context.Context) (json.RawMessage, error) {
			close(waiting)
			<-ctx.Done() // the effect in flight is aborted by the cancel
			return nil, ctx.Err()
		})
		fmt.Println("the flow sees the cancel:", errors.Is(err, kernel.ErrCanceled))
		return nil, err
	}}
	k, done := openExample(flows)
	defer done()
	ctx := context.Background()
	_, _ = k.Start(ctx, kernel.StartRequest{ID: "run-1", Flow: "worker", Principal: alice})
	<-waiting
	_ = k.Cancel(ctx, "run-1", "the user pressed stop")
	info, _ := k.Await(ctx, "run-1")
	fmt.Println(info.State, "-", info.Error)
	err := k.Cancel(ctx, "run-1", "again")
	fmt.Println("cancel after the end:", errors.Is(err, kernel.ErrEnded))
	// Output:
	// the flow sees the cancel: true
	// canceled - the user pressed stop
	// cancel after the end: true
}

func ExampleContext_StartChild() {
	flows := map[string]kernel.Flow{
		"parent": func(c *kernel.Context, _ json.RawMessage) (json.RawMessage, error) {
			id, err := c.StartChild(kernel.ChildRequest{Name: "search", Flow: "child", Input: json.RawMessage(`"loom"`)})
			if err != nil {
				return nil, err
			}
			info, err := c.AwaitEnd(id)
			if err != nil {
				return nil, err
			}
			return info.Output, nil
		},
		"child": func(c *kernel.Context, q json.RawMessage) (json.RawMessage, error) {
			var s string
			_ = json.Unmarshal(q, &s)
			return json.Marshal("found " + s)
		},
	}
	k, done := openExample(flows)
	defer done()
	ctx := context.Background()
	_, _ = k.Start(ctx, kernel.StartRequest{ID: "p", Flow: "parent", Principal: alice})
	info, _ := k.Await(ctx, "p")
	ref, _, _ := k.Parent(ctx, kernel.ChildID("p", "search"))
	fmt.Println(info.State, string(info.Output))
	fmt.Println("the child's parent:", ref.Parent, ref.Name)
	// Output:
	// completed "found loom"
	// the child's parent: p search
}

func ExampleContext_SendTo() {
	flows := map[string]kernel.Flow{
		"sender": func(c *kernel.Context, _ json.RawMessage) (json.RawMessage, error) {
			return nil, c.SendTo("inbox-owner", "greeting#1", json.RawMessage(`"hello"`))
		},
		"receiver": func(c *kernel.Context, _ json.RawMessage) (json.RawMessage, error) {
			m, err := c.Receive()
			if err != nil {
				return nil, err
			}
			return json.Marshal(m.Sender.Actor + " says " + string(m.Payload))
		},
	}
	k, done := openExample(flows)
	defer done()
	ctx := context.Background()
	_, _ = k.Start(ctx, kernel.StartRequest{ID: "inbox-owner", Flow: "receiver", Principal: alice})
	_, _ = k.Start(ctx, kernel.StartRequest{ID: "s1", Flow: "sender", Principal: alice})
	info, _ := k.Await(ctx, "inbox-owner")
	fmt.Println(string(info.Output))
	// Output:
	// "execution:s1 says \"hello\""
}

func ExampleContext_WaitSignal() {
	flows := map[string]kernel.Flow{"approval": func(c *kernel.Context, _ json.RawMessage) (json.RawMessage, error) {
		d, err := c.WaitSignal("approve:call-1")
		if err != nil {
			return nil, err
		}
		return d.Payload, nil
	}}
	k, done := openExample(flows)
	defer done()
	ctx := context.Background()
	_, _ = k.Start(ctx, kernel.StartRequest{ID: "run-2", Flow: "approval", Principal: alice})
	first, _ := k.Signal(ctx, "run-2", "approve:call-1", "req-81", json.RawMessage(`{"approved":true}`))
	again, _ := k.Signal(ctx, "run-2", "approve:call-1", "req-81", json.RawMessage(`{"approved":false}`))
	info, _ := k.Await(ctx, "run-2")
	fmt.Println(first, again, string(info.Output))
	// Output:
	// true false {"approved":true}
}

func ExampleContext_Sleep() {
	flows := map[string]kernel.Flow{"reminder": func(c *kernel.Context, _ json.RawMessage) (json.RawMessage, error) {
		if err := c.Sleep("backoff", 10*time.Millisecond); err != nil {
			return nil, err
		}
		return json.Marshal("woke")
	}}
	k, done := openExample(flows)
	defer done()
	ctx := context.Background()
	_, _ = k.Start(ctx, kernel.StartRequest{ID: "r", Flow: "reminder", Principal: alice})
	info, _ := k.Await(ctx, "r")
	fmt.Println(string(info.Output))
	// Output:
	// "woke"
}

func ExampleContext_SafePoint() {
	toolRunning := make(chan struct{})
	steered := make(chan struct{})
	flows := map[string]kernel.Flow{"loop": func(c *kernel.Context, _ json.RawMessage) (json.RawMessage, error) {
		_, err := c.Execute("tool#1", func(context.Context) (json.RawMessage, error) {
			close(toolRunning)
			<-steered
			return json.RawMessage(`"done"`), nil
		})
		if err != nil {
			return nil, err
		}
		steer, err := c.SafePoint("after tool#1")
		if err != nil {
			return nil, err
		}
		return json.Marshal(len(steer))
	}}
	k, done := openExample(flows)
	defer done()
	ctx := context.Background()
	_, _ = k.Start(ctx, kernel.StartRequest{ID: "l", Flow: "loop", Principal: alice})
	<-toolRunning
	_, _ = k.Send(ctx, "l", alice, "steer-1", json.RawMessage(`"use the other file"`))
	close(steered)
	info, _ := k.Await(ctx, "l")
	fmt.Println("steering messages picked up:", string(info.Output))
	// Output:
	// steering messages picked up: 1
}
