package perf

import (
	"bufio"
	"io"
	"os"
	"strconv"
	"strings"
)

// storageWritten is the number of bytes this process has caused to be written to storage so
// far, as Linux counts them (write_bytes in /proc/self/io: file pages the process dirtied,
// counted when dirtied, whether or not they have reached the disk yet; the process's threads
// together). ok is false where the count cannot be read (another system, a kernel built
// without task I/O accounting).
//
//	before, ok := storageWritten()
func storageWritten() (n int64, ok bool) {
	f, err := os.Open("/proc/self/io")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	return parseWriteBytes(f)
}

// parseWriteBytes reads the write_bytes line of a /proc/<pid>/io file; ok is false when r has
// no such line or its value is not a count.
func parseWriteBytes(r io.Reader) (n int64, ok bool) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		name, val, found := strings.Cut(sc.Text(), ":")
		if !found || name != "write_bytes" {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(val), 10, 64)
		if err != nil || n < 0 {
			return 0, false
		}
		return n, true
	}
	return 0, false
}
