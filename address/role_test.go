package address

import (
	"errors"
	"testing"
)

func TestParseRole(t *testing.T) {
	cases := []struct {
		in   string
		want Role
		err  error
	}{
		{"receive", RoleReceive, nil},
		{"send", RoleSend, nil},
		{"relay", RoleRelay, nil},
		{"Receive", 0, ErrRole},
		{"", 0, ErrRole},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			got, err := ParseRole(c.in)
			if !errors.Is(err, c.err) || got != c.want {
				t.Fatalf("ParseRole(%q) = %v, %v; want %v, %v", c.in, got, err, c.want, c.err)
			}
			if err == nil && got.String() != c.in {
				t.Fatalf("String() = %q, want %q", got.String(), c.in)
			}
		})
	}
}
