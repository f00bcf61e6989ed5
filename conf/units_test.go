package conf

import (
	"errors"
	"flag"
	"math"
	"strings"
	"testing"
	"time"
)

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want Size
		err  string // part of the error; empty for success
	}{
		{"0", 0, ""},
		{"1048576", 1 << 20, ""},
		{"1B", 1, ""},
		{"512k", 512 << 10, ""},
		{"512K", 512 << 10, ""},
		{"64KiB", 64 << 10, ""},
		{"64 KiB", 64 << 10, ""},
		{"64kib", 64 << 10, ""},
		{"64Ki", 64 << 10, ""},
		{"10KB", 10000, ""},
		{"1M", 1 << 20, ""},
		{"1MiB", 1 << 20, ""},
		{"1MB", 1e6, ""},
		{"1mb", 1e6, ""},
		{"10GB", 10e9, ""},
		{"2GiB", 2 << 30, ""},
		{"1T", 1 << 40, ""},
		{"1TB", 1e12, ""},
		{"1PiB", 1 << 50, ""},
		{"1.5KiB", 1536, ""},
		{"1.5GB", 15e8, ""},
		{"0.5MiB", 512 << 10, ""},
		{"1.", 1, ""},
		{" 7 ", 7, ""},
		{"8191PiB", 8191 << 50, ""},
		{"9223372036854775807", math.MaxInt64, ""},
		{"9223372036854775808", 0, "too large"},
		{"8192PiB", 0, "too large"},
		{"0.5B", 0, "not a whole number of bytes"},
		{"1.0000001KB", 0, "not a whole number of bytes"},
		{"-1", 0, "negative"},
		{"-1MiB", 0, "negative"},
		{"", 0, "invalid size"},
		{"MiB", 0, "invalid size"},
		{".", 0, "invalid size"},
		{".5K", 512, ""},
		{"1..5K", 0, "invalid size"},
		{"1/2K", 0, "invalid size"},
		{"1e6", 0, "invalid size"},
		{"0x10", 0, "invalid size"},
		{"10 parsecs", 0, "invalid size"},
		{"1EiB", 0, "invalid size"},
		{"1KiBB", 0, "invalid size"},
		{strings.Repeat("9", 100), 0, "invalid size"},
	}
	for _, tt := range tests {
		got, err := ParseSize(tt.in)
		switch {
		case tt.err == "" && err != nil:
			t.Errorf("ParseSize(%q) = %v", tt.in, err)
		case tt.err == "" && got != tt.want:
			t.Errorf("ParseSize(%q) = %d, want %d", tt.in, got, tt.want)
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("ParseSize(%q) = %d, %v; want an error with %q", tt.in, got, err, tt.err)
		}
	}
}

func TestSizeString(t *testing.T) {
	tests := []struct {
		in   Size
		want string
	}{
		{0, "0B"},
		{1, "1B"},
		{1536, "1536B"},
		{1 << 20, "1MiB"},
		{3 << 30, "3GiB"},
		{2000, "2KB"},
		{10e9, "10GB"},
		{1 << 50, "1PiB"},
		{-5, "-5B"},
	}
	for _, tt := range tests {
		if got := tt.in.String(); got != tt.want {
			t.Errorf("Size(%d).String() = %q, want %q", int64(tt.in), got, tt.want)
		}
		if tt.in < 0 {
			continue
		}
		back, err := ParseSize(tt.in.String())
		if err != nil || back != tt.in {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", tt.in.String(), back, err, tt.in)
		}
	}
}

// TestSizeFlag checks that Size works as a command-line flag, which is what
// UnmarshalText is for.
func TestSizeFlag(t *testing.T) {
	var s Size
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.TextVar(&s, "size", Size(0), "")
	if err := fs.Parse([]string{"-size", "64KiB"}); err != nil || s != 64<<10 {
		t.Errorf("flag -size 64KiB = %d, %v", s, err)
	}
}

func TestDuration(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"30s", 30 * time.Second, true},
		{"1m30s", 90 * time.Second, true},
		{"250ms", 250 * time.Millisecond, true},
		{"24h", 24 * time.Hour, true},
		{" 5m ", 5 * time.Minute, true},
		{"-1s", -time.Second, true}, // syntax only; checks refuse it where it matters
		{"0", 0, true},
		{"30", 0, false},
		{"1d", 0, false},
		{"", 0, false},
		{"soon", 0, false},
	}
	for _, tt := range tests {
		var d Duration
		err := d.UnmarshalText([]byte(tt.in))
		if (err == nil) != tt.ok || time.Duration(d) != tt.want {
			t.Errorf("Duration(%q) = %v, %v; want %v, ok=%v", tt.in, time.Duration(d), err, tt.want, tt.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "invalid duration") {
			t.Errorf("Duration(%q) error %q does not say why", tt.in, err)
		}
		if err != nil && errors.Unwrap(err) == nil {
			t.Errorf("Duration(%q) error does not wrap time's error", tt.in)
		}
	}
	if got := Duration(90 * time.Second).String(); got != "1m30s" {
		t.Errorf("String() = %q", got)
	}
}
