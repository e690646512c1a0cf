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
	"github.com/loomcheck/loomcheck/reference/internal/threads"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/spec/sutconfig"
)

func TestFromConfigMapsThreadsAndClaimsTheProfile(t *testing.T) {
	cfg := sutconfig.SUTConfig{DataDir: filepath.Join(t.TempDir(), "data"), Signing: sutconfig.SigningConfig{Key: base64.StdEncoding.EncodeToString(make([]byte, 32))}}
	opt, err := reference.FromConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if opt.Threads != nil || slices.Contains(opt.Gateway.Discovery.Profiles, "threads") {
		t.Fatalf("no roles, yet threads: %+v %v", opt.Threads, opt.Gateway.Discovery.Profiles)
	}
	cfg.Threads = sutconfig.ThreadsConfig{Roles: []sutconfig.RoleConfig{{Name: "planner", Prompt: "P"}}, Members: []sutconfig.Principal{{Tenant: "acme", Actor: "dana"}},
		Connections: []sutconfig.ConnectionConfig{{ID: "lab", URL: "http://127.0.0.1:1/peer", Send: "s", Accept: "a", Owner: sutconfig.Principal{Tenant: "acme", Actor: "olga"}}}}
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
