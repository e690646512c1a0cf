//go:build !race

package contract

// raceEnabled says the test binary was built with -race.
const raceEnabled = false
