package mqttgw

import "testing"

// filterMatches finds the filter of a SUBSCRIBE a retained message mochi
// dropped was for: it must match as mochi's index does.
func TestFilterMatches(t *testing.T) {
	for _, c := range []struct {
		filter, topic string
		want          bool
	}{
		{"a/b", "a/b", true}, {"a/b", "a/c", false}, {"a/b", "a/b/c", false}, {"a/b/c", "a/b", false},
		{"a/+", "a/b", true}, {"a/+", "a/b/c", false}, {"a/+", "a", false}, {"+/+", "a/b", true}, {"+", "/a", false},
		{"a/#", "a", true}, {"a/#", "a/b/c", true}, {"a/#", "b", false}, {"#", "a/b", true}, {"#", "/", true},
		{"a/+/c", "a//c", true}, {"+/b", "/b", true},
		{"#", "$SYS/x", false}, {"+/x", "$SYS/x", false}, {"$SYS/#", "$SYS/x", true}, {"$SYS/+", "$SYS/x", true},
	} {
		if got := filterMatches(c.filter, c.topic); got != c.want {
			t.Errorf("filterMatches(%q, %q) = %v, want %v", c.filter, c.topic, got, c.want)
		}
	}
}
