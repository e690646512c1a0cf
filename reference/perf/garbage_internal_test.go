package perf

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestGarbagePerTurn(t *testing.T) {
	before := &runtime.MemStats{TotalAlloc: 1000, NumGC: 7}
	after := &runtime.MemStats{TotalAlloc: 1000 + 4*3000, NumGC: 7 + 2}
	g, c := garbagePerTurn(before, after, 4)
	require.Equal(t, 3000.0, g)
	require.Equal(t, 500.0, c, "2 collections in 4 turns are 500 per 1000 turns")
	g, c = garbagePerTurn(before, after, 0)
	require.Zero(t, g)
	require.Zero(t, c)
	g, c = garbagePerTurn(before, before, 1)
	require.Zero(t, g)
	require.Zero(t, c)
	g, c = garbagePerTurn(before, after, 1)
	require.Equal(t, 4*3000.0, g, "one turn")
	require.Equal(t, 2000.0, c)
}

func TestAddGarbage(t *testing.T) {
	g, c := garbageRows("1 conversation", "bare")
	require.Equal(t, "garbage per turn, 1 conversation", g.Measure)
	require.Equal(t, "garbage collections per 1000 turns, 1 conversation", c.Measure)
	require.Equal(t, "bare", g.BaselineName)
	require.Equal(t, "bare", c.BaselineName)
	addGarbage(&g, &c, turnLoad{garbage: 1, collections: 2}, turnLoad{garbage: 3, collections: 4})
	addGarbage(&g, &c, turnLoad{garbage: 5, collections: 6}, turnLoad{garbage: 7, collections: 8})
	require.Equal(t, []float64{1, 5}, g.Baseline)
	require.Equal(t, []float64{3, 7}, g.Measured)
	require.Equal(t, []float64{2, 6}, c.Baseline)
	require.Equal(t, []float64{4, 8}, c.Measured)
}
