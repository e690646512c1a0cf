package gateway

import "encoding/json"

// recallOption reads the run option recall (spec/http.md, Run recall): true or false. ok is
// false for anything else (null, a string, a number, an object); whether the system can honour
// it is the run client's check.
//
//	recall, ok := recallOption(json.RawMessage(`true`)) // true, true
func recallOption(raw json.RawMessage) (bool, bool) {
	switch string(raw) {
	case "true":
		return true, true
	case "false":
		return false, true
	}
	return false, false
}
