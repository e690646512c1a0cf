package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/loomcheck/loomcheck/reference"
)

// cmdBackup copies the reference engine's store to one file, online: the engine serving on the
// data directory goes on serving and writing while it runs.
func cmdBackup(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("backup", usageBackup)
	dataDir := fs.String("data", "loom-data", "the data directory of the engine to back up (it may be serving)")
	to := fs.String("to", "", "the backup file to write (must not exist)")
	if code, ok := parse(fs, args, stderr); !ok {
		return code
	}
	if *to == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "loomcheck backup: usage: loomcheck backup --data DIR --to FILE")
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := reference.BackupDir(ctx, *dataDir, *to); err != nil {
		fmt.Fprintf(stderr, "loomcheck backup: %v\n", err)
		return exitNonConformant
	}
	fmt.Fprintf(stdout, "backed up %s to %s\n", *dataDir, *to)
	return exitConformant
}

// cmdRestore makes a data directory (new, or empty) the home of a backup, checking every record
// of it first.
func cmdRestore(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("restore", usageRestore)
	from := fs.String("from", "", "the backup file written by loomcheck backup")
	dataDir := fs.String("data", "", "the data directory to restore into (must not exist, or be empty)")
	if code, ok := parse(fs, args, stderr); !ok {
		return code
	}
	if *from == "" || *dataDir == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "loomcheck restore: usage: loomcheck restore --from FILE --data DIR")
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := reference.Restore(ctx, *from, *dataDir); err != nil {
		fmt.Fprintf(stderr, "loomcheck restore: %v\n", err)
		return exitNonConformant
	}
	fmt.Fprintf(stdout, "restored %s into %s\n", *from, *dataDir)
	return exitConformant
}

// usageBackup is what `loomcheck backup -h` prints above the flags.
const usageBackup = `usage: loomcheck backup --data DIR --to FILE

Copies the reference engine's store in DIR to FILE (which must not exist), consistent as of one
instant, while the engine goes on serving. Exit 0 when written, 2 otherwise.
`

// usageRestore is what `loomcheck restore -h` prints above the flags.
const usageRestore = `usage: loomcheck restore --from FILE --data DIR

Makes DIR (which must not exist, or be empty) the data directory of the backup FILE, checking
every record of it first. Exit 0 when restored, 2 otherwise.
`
