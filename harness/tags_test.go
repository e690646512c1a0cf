package harness_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/harness"
)

func TestParseTagExprMatchesGodogSyntax(t *testing.T) {
	cases := []struct {
		expr  string
		tags  []string
		match bool
	}{
		{"@a", []string{"@a"}, true},
		{"@a", []string{"@b"}, false},
		{"a", []string{"@a"}, true},
		{"~@a", []string{"@a"}, false},
		{"~@a", []string{"@b"}, true},
		{"~ @a", []string{"@b"}, true},
		{"@a && @b", []string{"@a"}, false},
		{"@a && @b", []string{"@a", "@b"}, true},
		{"@a&&~@b", []string{"@a", "@b"}, false},
		{"@a,@b", []string{"@b"}, true},
		{"@a, @b", []string{"@c"}, false},
		// "," binds loosest: (a && b) || c.
		{"@a && @b, @c", []string{"@c"}, true},
		{"@a && @b, @c", []string{"@a"}, false},
		{"@profile:core && ~@crash", []string{"@profile:core"}, true},
		{"@req:ADR0122-D1-02", []string{"@req:ADR0122-D1-02"}, true},
		{"@req:ADR0122-D1-02", []string{"@req:ADR0122-D1-0"}, false},
	}
	for _, c := range cases {
		e, err := harness.ParseTagExpr(c.expr)
		require.NoError(t, err, c.expr)
		require.Equal(t, c.match, e.Match(c.tags), "%q on %v", c.expr, c.tags)
		// The canonical form means the same.
		again, err := harness.ParseTagExpr(e.String())
		require.NoError(t, err)
		require.Equal(t, e, again, c.expr)
	}
}

func TestParseTagExprEmptyIsNoFilter(t *testing.T) {
	for _, s := range []string{"", "   ", "\t"} {
		e, err := harness.ParseTagExpr(s)
		require.NoError(t, err)
		require.Nil(t, e)
		require.True(t, e.Match(nil))
		require.Equal(t, "", e.String())
	}
}

func TestParseTagExprRefusesMalformedWithPosition(t *testing.T) {
	cases := []struct {
		expr string
		pos  int
	}{
		{"@", 2},
		{"@a &&", 6},
		{"@a && ", 7},
		{"@a &&, @b", 6},
		{",@a", 1},
		{"@a,", 4},
		{"@a,,@b", 4},
		{"~", 2},
		{"~@", 3},
		{"@a & @b", 4},
		{"@a @b", 4},
		{"@a@b", 3},
		{"@a~b", 3},
		{"(@a)", 1},
		{"@a && && @b", 7},
		{"@é && ,", 7},
	}
	for _, c := range cases {
		e, err := harness.ParseTagExpr(c.expr)
		require.Error(t, err, c.expr)
		require.Nil(t, e)
		require.True(t, errors.Is(err, harness.ErrUsage), "%q: a malformed filter is a usage error", c.expr)
		var te *harness.TagExprError
		require.True(t, errors.As(err, &te), c.expr)
		require.Equal(t, c.pos, te.Pos, "%q: %v", c.expr, err)
		require.Equal(t, c.expr, te.Expr)
	}
}

// FuzzParseTagExpr: the parser never panics, and whatever it accepts round-trips through its
// canonical form with the same meaning.
func FuzzParseTagExpr(f *testing.F) {
	for _, s := range []string{"@a", "@a && ~@b, @c", "@", "@a &&", ",", "~", "@profile:core&&~@crash", "@a,,"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e, err := harness.ParseTagExpr(s)
		if err != nil {
			var te *harness.TagExprError
			if !errors.As(err, &te) || te.Pos < 1 {
				t.Fatalf("%q: %v is not a positioned tag expression error", s, err)
			}
			return
		}
		again, err := harness.ParseTagExpr(e.String())
		if err != nil {
			t.Fatalf("%q: canonical form %q does not parse: %v", s, e.String(), err)
		}
		if e.String() != again.String() {
			t.Fatalf("%q: canonical form is not stable: %q then %q", s, e.String(), again.String())
		}
	})
}
