package message_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/petrelmq/petrel/message"
)

func TestParseDestination(t *testing.T) {
	long := strings.Repeat("a", 128)
	cases := []struct {
		in         string
		name, node string
		ok         bool
	}{
		{"orders", "orders", "", true},
		{"orders@plant-7", "orders", "plant-7", true},
		{"A.b_c-9@N.o_d-e", "A.b_c-9", "N.o_d-e", true},
		{"_x@_y", "_x", "_y", true},
		{long + "@" + long, long, long, true},
		{"", "", "", false},
		{"@plant-7", "", "", false},
		{"orders@", "", "", false},
		{"orders@plant@7", "", "", false},
		{"or ders", "", "", false},
		{"orders@plant 7", "", "", false},
		{".hidden", "", "", false},
		{"-flag", "", "", false},
		{"orders@.x", "", "", false},
		{"orders@-x", "", "", false},
		{long + "a", "", "", false},
		{"orders@" + long + "a", "", "", false},
		{"ördérs", "", "", false},
		{"orders/x", "", "", false},
		{"orders\x00", "", "", false},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			name, node, err := message.ParseDestination(c.in)
			if !c.ok {
				if !errors.Is(err, message.ErrDestination) {
					t.Fatalf("err = %v, want ErrDestination", err)
				}
				return
			}
			if err != nil || name != c.name || node != c.node {
				t.Fatalf("got %q, %q, %v; want %q, %q", name, node, err, c.name, c.node)
			}
			if j := message.JoinDestination(name, node); j != c.in {
				t.Fatalf("JoinDestination = %q, want %q", j, c.in)
			}
		})
	}
}

func TestValidName(t *testing.T) {
	cases := map[string]bool{
		"a": true, "Z": true, "9": true, "_": true, "a.b": true, "a-b": true, "a_b.c-d": true,
		strings.Repeat("x", 128): true,
		"":                       false, strings.Repeat("x", 129): false, ".a": false, "-a": false,
		".": false, "..": false, "a@b": false, "a b": false, "a/b": false, "a\\b": false,
		"é": false, "a\n": false, "a:b": false,
	}
	for in, ok := range cases {
		err := message.ValidName(in)
		if ok && err != nil {
			t.Errorf("ValidName(%q) = %v, want nil", in, err)
		}
		if !ok && !errors.Is(err, message.ErrDestination) {
			t.Errorf("ValidName(%q) = %v, want ErrDestination", in, err)
		}
	}
}

// Errors tell the user what to do, and stay short for huge input.
func TestNameErrorIsReadable(t *testing.T) {
	err := message.ValidName("bad name" + strings.Repeat("x", 10000))
	if err == nil || len(err.Error()) > 400 || !strings.Contains(err.Error(), "use 1 to 128 letters") {
		t.Fatalf("error %q", err)
	}
	_, _, err = message.ParseDestination("orders@plant 7")
	if !strings.Contains(err.Error(), `node name "plant 7" has ' ' at byte 5`) {
		t.Fatalf("error %q does not say what is wrong", err)
	}
}

func TestJoinDestination(t *testing.T) {
	if got := message.JoinDestination("orders", ""); got != "orders" {
		t.Errorf("got %q", got)
	}
	if got := message.JoinDestination("orders", "plant-7"); got != "orders@plant-7" {
		t.Errorf("got %q", got)
	}
}

func TestParseNodeID(t *testing.T) {
	want := message.NodeID{0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0xfe, 0xdc, 0xba, 0x98, 0x76, 0x54, 0x32, 0x10}
	cases := []struct {
		in string
		ok bool
	}{
		{"0123456789abcdeffedcba9876543210", true},
		{"0123456789ABCDEFFEDCBA9876543210", true},
		{"0123456789abcdefFEDCBA9876543210", true},
		{"", false},
		{"0123456789abcdeffedcba987654321", false},
		{"0123456789abcdeffedcba98765432100", false},
		{"0123456789abcdeffedcba987654321g", false},
		{"0123456789abcdef-edcba9876543210", false},
		{" 123456789abcdeffedcba9876543210", false},
		{"0x23456789abcdeffedcba9876543210", false},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			id, err := message.ParseNodeID(c.in)
			if c.ok != (err == nil) {
				t.Fatalf("err = %v, want ok=%v", err, c.ok)
			}
			if c.ok && id != want {
				t.Fatalf("id = %v", id)
			}
		})
	}
}

func TestNodeID(t *testing.T) {
	a, err := message.NewNodeID()
	if err != nil {
		t.Fatal(err)
	}
	b, err := message.NewNodeID()
	if err != nil {
		t.Fatal(err)
	}
	if a == b || a.IsZero() || b.IsZero() {
		t.Fatalf("two new ids %v and %v", a, b)
	}
	s := a.String()
	if len(s) != 32 || strings.ToLower(s) != s {
		t.Fatalf("String() = %q, want 32 lowercase hex digits", s)
	}
	if back, err := message.ParseNodeID(s); err != nil || back != a {
		t.Fatalf("ParseNodeID(String()) = %v, %v", back, err)
	}
	if !(message.NodeID{}).IsZero() {
		t.Fatal("zero id is not IsZero")
	}
	if got := origin.String(); got != "0123456789abcdeffedcba9876543210" {
		t.Fatalf("String() = %q", got)
	}
}

func TestKind(t *testing.T) {
	cases := []struct {
		k    message.Kind
		name string
	}{
		{message.KindCommand, "command"},
		{message.KindData, "data"},
		{message.KindFile, "file"},
	}
	for _, c := range cases {
		if got := c.k.String(); got != c.name {
			t.Errorf("%d.String() = %q, want %q", c.k, got, c.name)
		}
		for _, in := range []string{c.name, strings.ToUpper(c.name)} {
			if k, err := message.ParseKind(in); err != nil || k != c.k {
				t.Errorf("ParseKind(%q) = %v, %v", in, k, err)
			}
		}
	}
	for _, k := range []message.Kind{0, 4, 255} {
		if got, want := k.String(), "kind("; !strings.HasPrefix(got, want) {
			t.Errorf("Kind(%d).String() = %q", k, got)
		}
	}
	for _, in := range []string{"", "kind(1)", "1", "datas", " data"} {
		if _, err := message.ParseKind(in); !errors.Is(err, message.ErrKind) {
			t.Errorf("ParseKind(%q) err = %v, want ErrKind", in, err)
		}
	}
}
