package gateway

import "encoding/json"

// recallOption reads the run option recall (spec/http.md, Run recall): true or false. ok is
// false for anything else (null, a string, a number, an object), and recall is then false;
// whether the system can honour it is the run client's check.
//
//	recall, ok := recallOption(json.RawMessage(`true`)) // true, true
func recallOption(raw json.RawMessage) (recall, ok bool) {
	switch s := string(raw); s {
	case "true", "false":
		return s == "true", true
	}
	return recall, ok
}
