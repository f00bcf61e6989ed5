package nodeproc

import (
	"os/exec"
	"syscall"
)

// setParentDeathSignal has the kernel kill the child if the thread that
// started it ends, which happens at the latest when this process dies,
// even by SIGKILL: a bench or test killed midway leaves no node behind.
// Proc.start keeps that thread alive while the child runs.
func setParentDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
