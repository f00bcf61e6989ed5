package mqttgw

import (
	"errors"
	"strings"
	"testing"

	"github.com/petrelmq/petrel/message"
)

// FuzzSharedFilter: whatever filter a SUBSCRIBE carries, splitShared
// either leaves a filter not shared as it is, refuses a $share one with
// ErrShare, or splits it into a non-empty group without '/', '+' or '#'
// and a non-empty filter that join back to it; and the group's
// subscription name is a valid Petrel name, never a persistent session's.
func FuzzSharedFilter(f *testing.F) {
	for _, s := range []string{"$share/g/t/#", "$share//t", "$share/g", "$share/g+/x", "t/#", "$SHARE/g/x", "$share/ü é/a/+/b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, filter string) {
		group, rest, shared, err := splitShared(filter)
		switch {
		case !shared:
			if err != nil || rest != filter || strings.HasPrefix(filter, "$share/") {
				t.Fatalf("%q: not shared, but %q, %v", filter, rest, err)
			}
		case err != nil:
			if !errors.Is(err, ErrShare) {
				t.Fatalf("%q: %v is not ErrShare", filter, err)
			}
		default:
			if group == "" || rest == "" || strings.ContainsAny(group, "/+#") || "$share/"+group+"/"+rest != filter {
				t.Fatalf("%q split into %q and %q", filter, group, rest)
			}
			name := shareName(group, rest)
			if err := message.ValidName(name); err != nil || !strings.HasPrefix(name, sharePrefix) || strings.HasPrefix(name, "mqtt.") {
				t.Fatalf("%q: share name %q: %v", filter, name, err)
			}
		}
	})
}
