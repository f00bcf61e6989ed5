//go:build !linux

package nodeproc

import "os/exec"

// setParentDeathSignal does nothing here: only Linux has a parent-death
// signal. Agents still stop when their stdin closes with the parent.
func setParentDeathSignal(cmd *exec.Cmd) {}
