package perf

import (
	"encoding/binary"
	"errors"
	"io"
	"os"
)

// SQLite's write-ahead log (https://www.sqlite.org/fileformat.html#the_write_ahead_log): a
// 32-byte header, then frames, each a 24-byte header and one page. A frame belongs to the log's
// current contents when the two salts of its header equal the log header's; a frame whose
// "database size" field is not zero ends a commit. When a checkpoint has copied every frame back,
// the next writer starts the log again from the top with new salts, so the frames of the earlier
// contents that remain past the new ones no longer match.
const (
	walHeaderLen      = 32
	walFrameHeaderLen = 24
)

// walCount is what a write-ahead log holds at one moment: the salts that name its current
// contents, and the frames and commits of those contents (trailing frames of a commit not yet
// ended are not counted).
type walCount struct {
	salt    [8]byte
	frames  int64
	commits int64
}

// readWAL counts the committed frames of the write-ahead log at path. A log that does not exist
// or is shorter than its header holds nothing (a zero count).
func readWAL(path string) (walCount, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return walCount{}, nil
	}
	if err != nil {
		return walCount{}, err
	}
	defer f.Close()
	return countWAL(f)
}

// countWAL reads a write-ahead log from r.
func countWAL(r io.Reader) (walCount, error) {
	var c walCount
	hdr := make([]byte, walHeaderLen)
	if _, err := io.ReadFull(r, hdr); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return walCount{}, nil
		}
		return walCount{}, err
	}
	pageSize := int64(binary.BigEndian.Uint32(hdr[8:12]))
	if pageSize == 1 {
		pageSize = 65536 // the format's spelling of the largest page size
	}
	if pageSize < 512 || pageSize&(pageSize-1) != 0 {
		return walCount{}, errors.New("perf: write-ahead log: not a page size")
	}
	copy(c.salt[:], hdr[16:24])
	frame := make([]byte, walFrameHeaderLen+pageSize)
	var pending int64
	for {
		if _, err := io.ReadFull(r, frame); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return c, nil
			}
			return walCount{}, err
		}
		if string(frame[8:16]) != string(c.salt[:]) {
			return c, nil
		}
		pending++
		if binary.BigEndian.Uint32(frame[4:8]) != 0 {
			c.frames += pending
			c.commits++
			pending = 0
		}
	}
}

// walAppended is what the log gained from before to after, and ok: false when the log was
// started again in between (its salts changed), which leaves what was appended before the
// restart uncounted.
func walAppended(before, after walCount) (frames, commits int64, ok bool) {
	if before.salt != after.salt || after.frames < before.frames {
		return 0, 0, false
	}
	return after.frames - before.frames, after.commits - before.commits, true
}
