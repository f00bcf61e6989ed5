package nodeproc

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// PeakRSSMB returns the peak resident set size of this process in MiB, from
// the kernel's high-water mark (VmHWM), which sees every page the process
// ever had resident, Go heap, SQLite's C heap and mmaps alike. Linux only.
func PeakRSSMB() (float64, error) {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, fmt.Errorf("read peak RSS: %w", err)
	}
	return parseVmHWM(data)
}

// CurrentRSSKiB returns the resident set size of this process now
// (VmRSS) in KiB. Linux only.
func CurrentRSSKiB() (float64, error) {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, fmt.Errorf("read RSS: %w", err)
	}
	kb, err := statusKB(data, "VmRSS:")
	return float64(kb), err
}

// PeakRSSMB reads the process's VmHWM from /proc; the process must still
// run.
func (p *Proc) PeakRSSMB() (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.Pid()))
	if err != nil {
		return 0, fmt.Errorf("%s: read peak RSS: %w", p.name, err)
	}
	return parseVmHWM(data)
}

// parseVmHWM reads the "VmHWM:  1234 kB" line of /proc/<pid>/status.
func parseVmHWM(status []byte) (float64, error) {
	kb, err := statusKB(status, "VmHWM:")
	if err != nil {
		return 0, fmt.Errorf("read peak RSS: %w", err)
	}
	return float64(kb) / 1024, nil
}

// statusKB reads the "<key>  1234 kB" line of a /proc/<pid>/status.
func statusKB(status []byte, key string) (int64, error) {
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), key)
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s %q: %w", strings.TrimSuffix(key, ":"), rest, err)
		}
		return kb, nil
	}
	return 0, fmt.Errorf("no %s line in /proc status", strings.TrimSuffix(key, ":"))
}
