//go:build !linux

package main

import "syscall"

// childProcAttr is nil off Linux: servers are stopped by the run's own
// cleanup only.
func childProcAttr() *syscall.SysProcAttr { return nil }

// selfCPU is not measured off Linux.
func selfCPU() float64 { return 0 }
