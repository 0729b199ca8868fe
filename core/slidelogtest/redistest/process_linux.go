package redistest

import (
	"os"
	"syscall"
)

// procAttr puts a server in a process group of its own (Kill ends the
// children it forks for replication too) and makes the kernel kill it
// when the process that started it dies, so that a test killed by its
// timeout leaves no server behind.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// killGroup sends SIGKILL to p's process group.
func killGroup(p *os.Process) {
	if syscall.Kill(-p.Pid, syscall.SIGKILL) != nil {
		_ = p.Kill()
	}
}

// raisePriority sets pid's nice value to -10 where the caller may.
func raisePriority(pid int) {
	_ = syscall.Setpriority(syscall.PRIO_PROCESS, pid, -10)
}
