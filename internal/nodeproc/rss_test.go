package nodeproc

import "testing"

func TestParseVmHWM(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status string
		want   float64
		ok     bool
	}{
		{"present", "Name:\tpetrel\nVmPeak:\t  9000 kB\nVmHWM:\t    2048 kB\nVmRSS:\t 1024 kB\n", 2, true},
		{"absent", "Name:\tpetrel\n", 0, false},
		{"garbled", "VmHWM:\tlots kB\n", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseVmHWM([]byte(tc.status))
			if (err == nil) != tc.ok || got != tc.want {
				t.Errorf("parseVmHWM = %v, %v; want %v, ok %v", got, err, tc.want, tc.ok)
			}
		})
	}
}

func TestPeakRSS(t *testing.T) {
	mb, err := PeakRSSMB()
	if err != nil {
		t.Skipf("no /proc here: %v", err)
	}
	if mb <= 0 {
		t.Errorf("peak RSS %v MiB, want > 0", mb)
	}
}
