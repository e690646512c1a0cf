//go:build race

package threads_test

// raceEnabled says the test binary was built with -race.
const raceEnabled = true
