package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestShardOfSplitsThePackagesByPlace(t *testing.T) {
	list := []string{"a", "b", "c", "d", "e"}
	var union []string
	for k, want := range [][]string{{"a", "d"}, {"b", "e"}, {"c"}} {
		got, err := shardOf(list, []string{"0/3", "1/3", "2/3"}[k])
		require.NoError(t, err)
		require.Equal(t, want, got)
		union = append(union, got...)
	}
	require.ElementsMatch(t, list, union, "the shards cover every package once")
	got, err := shardOf(list, "0/1")
	require.NoError(t, err)
	require.Equal(t, list, got)
	for _, bad := range []string{"3/3", "-1/3", "1/0", "1", "a/b", "1/3/4", ""} {
		_, err := shardOf(list, bad)
		require.Error(t, err, bad)
	}
}
