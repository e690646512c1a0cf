package schemas

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The stream frame vectors (fixtures/stream/frames.json): each frame is valid or not against
// stream-frame (a rejected one with a problem at the pointer it names), and every type the frame schema names has a valid frame among them.
func TestStreamFrameVectors(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "fixtures", "stream", "frames.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Vectors []struct {
			Name  string          `json:"name"`
			Valid bool            `json:"valid"`
			At    string          `json:"at"`
			Frame json.RawMessage `json:"frame"`
		} `json:"vectors"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	covered := map[string]bool{}
	invalid := 0
	for _, v := range doc.Vectors {
		err := Validate("stream-frame", v.Frame)
		var verr *ValidationError
		switch {
		case v.Valid && err != nil:
			t.Errorf("%s: want valid, got %v", v.Name, err)
		case !v.Valid && err == nil:
			t.Errorf("%s: want rejected, the schema takes it", v.Name)
		case !v.Valid && !errors.As(err, &verr):
			t.Errorf("%s: want a *ValidationError, got %v", v.Name, err)
		case !v.Valid:
			if !slices.ContainsFunc(verr.Problems, func(p Problem) bool { return p.Pointer == v.At }) {
				t.Errorf("%s: want a problem at %q, got %v", v.Name, v.At, verr.Problems)
			}
		}
		if v.Valid {
			var f struct{ Type string }
			_ = json.Unmarshal(v.Frame, &f)
			covered[f.Type] = true
		} else {
			invalid++
		}
	}
	if invalid == 0 {
		t.Error("no vector the schema must reject")
	}
	schemaRaw, err := Raw("stream-frame")
	if err != nil {
		t.Fatal(err)
	}
	var sch struct {
		Properties struct {
			Type struct {
				Enum []string `json:"enum"`
			} `json:"type"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(schemaRaw, &sch); err != nil || len(sch.Properties.Type.Enum) == 0 {
		t.Fatalf("the frame schema names no types: %v", err)
	}
	for _, ty := range sch.Properties.Type.Enum {
		if !covered[ty] {
			t.Errorf("no valid vector of type %s", ty)
		}
		// Every kind has its own data schema.
		if _, err := Raw("stream-" + strings.TrimPrefix(ty, "session.")); err != nil {
			t.Errorf("type %s: %v", ty, err)
		}
	}
}
