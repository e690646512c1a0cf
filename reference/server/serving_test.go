package server

import "testing"

func TestServingAddrReadsTheLineTheServerPrints(t *testing.T) {
	for line, want := range map[string]string{
		"loom reference 1.2.3 serving http://127.0.0.1:4312 (data in /tmp/d)": "127.0.0.1:4312",
		"serving http://[::1]:80": "[::1]:80",
		"no model configured: answering with the built-in deterministic model": "",
		"serving https://127.0.0.1:1":                                          "",
	} {
		got, ok := ServingAddr(line)
		if got != want || ok != (want != "") {
			t.Errorf("ServingAddr(%q) = %q, %v; want %q", line, got, ok, want)
		}
	}
}
