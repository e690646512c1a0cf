package perf

import (
	"bytes"
	"encoding/binary"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// walBytes builds a write-ahead log of pages of size pageSize: a header with salt, then one frame
// per entry of commits, each entry its frame's "database size" field (not zero ends a commit),
// the frames of stale carrying the other salt.
func walBytes(pageSize uint32, salt, stale [8]byte, commits []uint32, staleFrames int) []byte {
	var b bytes.Buffer
	hdr := make([]byte, walHeaderLen)
	binary.BigEndian.PutUint32(hdr[0:4], 0x377f0682)
	binary.BigEndian.PutUint32(hdr[8:12], pageSize)
	copy(hdr[16:24], salt[:])
	b.Write(hdr)
	frame := func(size uint32, s [8]byte) {
		fh := make([]byte, walFrameHeaderLen)
		binary.BigEndian.PutUint32(fh[0:4], 1)
		binary.BigEndian.PutUint32(fh[4:8], size)
		copy(fh[8:16], s[:])
		b.Write(fh)
		b.Write(make([]byte, pageSize))
	}
	for _, c := range commits {
		frame(c, salt)
	}
	for range staleFrames {
		frame(7, stale)
	}
	return b.Bytes()
}

func TestCountWAL(t *testing.T) {
	salt, other := [8]byte{1, 2, 3, 4, 5, 6, 7, 8}, [8]byte{9, 9, 9, 9, 9, 9, 9, 9}
	c, err := countWAL(bytes.NewReader(walBytes(4096, salt, other, []uint32{0, 5, 6, 0, 0, 9}, 0)))
	require.NoError(t, err)
	assert.Equal(t, walCount{salt: salt, frames: 6, commits: 3}, c)

	c, err = countWAL(bytes.NewReader(walBytes(512, salt, other, []uint32{3, 0}, 0)))
	require.NoError(t, err)
	assert.Equal(t, walCount{salt: salt, frames: 1, commits: 1}, c, "a commit not ended is not counted")

	c, err = countWAL(bytes.NewReader(walBytes(1024, salt, other, []uint32{3}, 4)))
	require.NoError(t, err)
	assert.Equal(t, walCount{salt: salt, frames: 1, commits: 1}, c, "frames of the earlier contents are not counted")

	whole := walBytes(1024, salt, other, []uint32{3, 4}, 0)
	c, err = countWAL(bytes.NewReader(whole[:len(whole)-1]))
	require.NoError(t, err)
	assert.Equal(t, walCount{salt: salt, frames: 1, commits: 1}, c, "a frame cut short is not counted")

	c, err = countWAL(bytes.NewReader(whole[:walHeaderLen-1]))
	require.NoError(t, err)
	assert.Equal(t, walCount{}, c, "a header cut short holds nothing")

	_, err = countWAL(bytes.NewReader(walBytes(1000, salt, other, nil, 0)))
	assert.Error(t, err, "not a page size")

	c, err = readWAL(filepath.Join(t.TempDir(), "none-wal"))
	require.NoError(t, err)
	assert.Equal(t, walCount{}, c, "no log")
}

func TestWALAppended(t *testing.T) {
	a, b := [8]byte{1}, [8]byte{2}
	f, n, ok := walAppended(walCount{salt: a, frames: 10, commits: 3}, walCount{salt: a, frames: 25, commits: 7})
	assert.True(t, ok)
	assert.Equal(t, int64(15), f)
	assert.Equal(t, int64(4), n)
	_, _, ok = walAppended(walCount{salt: a, frames: 10}, walCount{salt: b, frames: 25})
	assert.False(t, ok, "started again")
	_, _, ok = walAppended(walCount{salt: a, frames: 10}, walCount{salt: a, frames: 9})
	assert.False(t, ok, "fewer frames")
}
