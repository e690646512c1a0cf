package reference_test

import (
	"context"
	"encoding/base64"
	"errors"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/loomcheck/loomcheck/reference"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/threads"
	"github.com/loomcheck/loomcheck/spec"
)

func TestFromConfigMapsThreadsAndClaimsTheProfile(t *testing.T) {
	cfg := spec.SUTConfig{DataDir: filepath.Join(t.TempDir(), "data"), Signing: spec.SigningConfig{Key: base64.StdEncoding.EncodeToString(make([]byte, 32))}}
	opt, err := reference.FromConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if opt.Threads != nil || slices.Contains(opt.Gateway.Discovery.Profiles, "threads") {
		t.Fatalf("no roles, yet threads: %+v %v", opt.Threads, opt.Gateway.Discovery.Profiles)
	}
	cfg.Threads = spec.ThreadsConfig{Roles: []spec.RoleConfig{{Name: "planner", Prompt: "P"}}, Members: []spec.Principal{{Tenant: "acme", Actor: "dana"}},
		Connections: []spec.ConnectionConfig{{ID: "lab", URL: "http://127.0.0.1:1/peer", Send: "s", Accept: "a", Owner: spec.Principal{Tenant: "acme", Actor: "olga"}}}}
	opt, err = reference.FromConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(opt.Gateway.Discovery.Profiles, "threads") || opt.Threads == nil {
		t.Fatalf("roles, yet no threads: %v", opt.Gateway.Discovery.Profiles)
	}
	got := *opt.Threads
	got.HTTPClient = nil
	want := threads.Config{Roles: []threads.Role{{Name: "planner", Prompt: "P"}}, Members: []loomtype.Identity{{Tenant: "acme", Actor: "dana"}},
		Connections: []threads.Connection{{ID: "lab", URL: "http://127.0.0.1:1/peer", Send: "s", Accept: "a", Owner: loomtype.Identity{Tenant: "acme", Actor: "olga"}}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("threads config:\n got %+v\nwant %+v", got, want)
	}
	cfg.Threads.Roles[0].Name = "Planner"
	if _, err := reference.OpenConfig(context.Background(), cfg); !errors.Is(err, loomtype.ErrConfig) {
		t.Fatalf("a bad role name opens: %v", err)
	}
}
