//go:build race

package selftest

// raceEnabled says the test binary was built with -race.
const raceEnabled = true
