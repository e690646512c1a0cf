//go:build race

package harness_test

// raceEnabled says the test binary was built with -race.
const raceEnabled = true
