package loomtype

// ValidName reports whether s is a name a caller may choose, of at most max bytes: one to max
// ASCII letters, digits, '.', '_' and '-', the first a letter or a digit (a conversation's id,
// ^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$ in spec/http.md, and a run's). It is a loop, where a regular
// expression's bounded repeat would be compiled into a program of some hundred instructions when
// the program starts.
//
//	ok := loomtype.ValidName("c-1", 128)
func ValidName(s string, max int) bool {
	if len(s) < 1 || len(s) > max || !alnum(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; !alnum(c) && c != '.' && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

func alnum(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' }
