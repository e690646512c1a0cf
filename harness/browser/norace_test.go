//go:build !race

package browser

// raceEnabled says the test binary was built with -race; the server binary is built likewise.
const raceEnabled = false
