package server

import "regexp"

// servingLine is the part of the line the server prints on its standard output once it listens:
// "loom reference VERSION serving http://ADDR (WHERE)".
var servingLine = regexp.MustCompile(`serving http://(\S+)`)

// ServingAddr returns the address in line when line is the one the server prints once it
// listens, so a program that started it on port 0 learns the port it was given.
//
//	addr, ok := server.ServingAddr("loom reference 1.0 serving http://127.0.0.1:4312 (data in d)")
//	// addr == "127.0.0.1:4312", ok
func ServingAddr(line string) (string, bool) {
	m := servingLine.FindStringSubmatch(line)
	if m == nil {
		return "", false
	}
	return m[1], true
}
