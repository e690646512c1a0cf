package sqlite

import "testing"

// The allocation-free event checksum is the general one over the same fields.
func TestEventSumIsSumOfItsFields(t *testing.T) {
	for _, data := range [][]byte{nil, {}, []byte(`{"a":1}`)} {
		want := sumOf([]byte("x/c1"), i64(3), i64(17), []byte("decision"), data, i64(1700000000000))
		if got := eventSum("x/c1", 3, 17, "decision", data, 1700000000000); got != want {
			t.Fatalf("eventSum %x, sumOf %x", got, want)
		}
	}
	if eventSum("ab", 0, 1, "c", nil, 0) == eventSum("a", 0, 1, "bc", nil, 0) {
		t.Fatal("fields are not length-prefixed")
	}
}
