package run_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/loomcheck/loomcheck/reference/internal/run"
	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/model"
	"github.com/loomcheck/loomcheck/reference/store/sqlite"
)

// answers repeats the last message it was sent.
type answers struct{}

func (answers) Complete(_ context.Context, req model.Request, _ func(string)) (model.Response, error) {
	return model.Response{Content: "re: " + req.Messages[len(req.Messages)-1].Content, FinishReason: model.FinishStop}, nil
}

// Start a run on a kernel of its own, read it back, and see that nobody else can.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "run-example-*")
	defer os.RemoveAll(dir)
	st, err := sqlite.Open(ctx, filepath.Join(dir, "loom.db"), sqlite.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	rs := run.New(run.Deps{Provider: answers{}})
	k, err := kernel.Open(ctx, st, kernel.Options{Flows: rs.Flows(), BeforeRecovery: rs.Bind})
	if err != nil {
		log.Fatal(err)
	}
	defer k.Close()

	alice := loomtype.Identity{Tenant: "acme", Actor: "alice"}
	v, created, err := rs.Start(ctx, alice, run.Options{ID: "weekly", Prompt: "check the pumps"})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := k.Await(ctx, v.ID); err != nil {
		log.Fatal(err)
	}
	v, _ = rs.Get(ctx, alice, v.ID)
	fmt.Println(created, v.Status, *v.Output)
	_, again, _ := rs.Start(ctx, alice, run.Options{ID: "weekly", Prompt: "check the pumps"})
	fmt.Println("started again:", again)
	_, err = rs.Get(ctx, loomtype.Identity{Tenant: "evil", Actor: "alice"}, v.ID)
	fmt.Println(errors.Is(err, run.ErrNotFound))
	// Output:
	// true completed re: check the pumps
	// started again: false
	// true
}
