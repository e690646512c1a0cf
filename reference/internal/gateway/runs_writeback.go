package gateway

import (
	"bytes"
	"encoding/json"

	"github.com/loomcheck/loomcheck/reference/internal/run"
)

// writeBackOption reads the writeBack member of a run's start (spec/http.md, Run write-back):
// an object with at most toolId (a non-empty string), unless and allowDirect (booleans). ok is
// false for anything else (true, null, an unknown member, a member of the wrong type); whether the
// system can honour it is the run client's check.
func writeBackOption(raw json.RawMessage) (*run.WriteBack, bool) {
	var v struct {
		ToolID      *string `json:"toolId"`
		Unless      *bool   `json:"unless"`
		AllowDirect *bool   `json:"allowDirect"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] != '{' {
		return nil, false
	}
	if err := dec.Decode(&v); err != nil || dec.More() {
		return nil, false
	}
	wb := &run.WriteBack{Unless: v.Unless}
	if v.ToolID != nil {
		if *v.ToolID == "" {
			return nil, false
		}
		wb.ToolID = *v.ToolID
	}
	if v.AllowDirect != nil {
		wb.AllowDirect = *v.AllowDirect
	}
	return wb, true
}
