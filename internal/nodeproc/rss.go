package nodeproc

import (
	"bufio"
	"bytes"
	"errors"
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
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("read peak RSS: VmHWM %q: %w", rest, err)
		}
		return float64(kb) / 1024, nil
	}
	return 0, errors.New("read peak RSS: no VmHWM in /proc/self/status")
}
