package harness_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/harness"
)

func TestDidYouMean(t *testing.T) {
	profiles := []string{"core", "durability", "gateway", "threads"}
	require.Equal(t, ` (did you mean "core"?)`, harness.DidYouMean("cor", profiles))
	require.Equal(t, ` (did you mean "durability"?)`, harness.DidYouMean("durabilty", profiles))
	require.Equal(t, ` (did you mean "core"?)`, harness.DidYouMean("CORE", profiles))
	require.Empty(t, harness.DidYouMean("core", profiles), "a name that is right needs no hint")
	require.Empty(t, harness.DidYouMean("zzzzzz", profiles), "nothing close")
	require.Empty(t, harness.DidYouMean("core", nil))
}

// TestUnknownNamesGetAHint: a --profile or an @req: id the catalogue does not hold is a usage
// error whose message offers the closest name.
func TestUnknownNamesGetAHint(t *testing.T) {
	_, err := harness.Execute(context.Background(), harness.Options{Factory: referenceFactory, Profiles: []string{"cor"}})
	require.ErrorIs(t, err, harness.ErrUsage)
	require.Contains(t, err.Error(), `did you mean "core"?`)
	_, err = harness.Execute(context.Background(), harness.Options{Factory: referenceFactory, Tags: "@req:adr0122-d1-01x"})
	require.ErrorIs(t, err, harness.ErrUsage)
	require.Contains(t, err.Error(), `did you mean "ADR0122-D1-01"?`)
}
