package sessions

import "testing"

func TestRedactHidesSecretsAndNothingElse(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"make test", "make test"},
		{"ls -la /tmp", "ls -la /tmp"},
		{"mysql --password hunter2 -u root", "mysql --password [redacted] -u root"},
		{"deploy --token=abc123", "deploy --token=[redacted]"},
		{"export API_KEY=sk-123", "export API_KEY=[redacted]"},
		{"DB_PASSWORD=pw ./run", "DB_PASSWORD=[redacted] ./run"},
		{"curl -H 'Authorization: Bearer abc.def' https://x", "curl -H 'Authorization: Bearer [redacted]' https://x"},
		{"git clone https://bob:s3cret@example.com/r.git", "git clone https://bob:[redacted]@example.com/r.git"},
		{"echo password", "echo password"},
	} {
		if got := Redact(c.in); got != c.want {
			t.Errorf("Redact(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestValidCommandBounds(t *testing.T) {
	long := make([]byte, MaxCommandBytes)
	for i := range long {
		long[i] = 'a'
	}
	for _, c := range []struct {
		in string
		ok bool
	}{{"", false}, {"ls\tx", true}, {"ls\nrm", false}, {"\x7f", false}, {string(long), true}, {string(long) + "a", false}, {"\xff", false}} {
		if validCommand(c.in) != c.ok {
			t.Errorf("validCommand(%q) = %v", c.in, !c.ok)
		}
	}
}
