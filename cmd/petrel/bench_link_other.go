//go:build !linux

package main

import "os/exec"

// setParentDeathSignal does nothing here: only Linux has a parent-death
// signal. Agents still stop when their stdin closes with the parent.
func setParentDeathSignal(cmd *exec.Cmd) {}
