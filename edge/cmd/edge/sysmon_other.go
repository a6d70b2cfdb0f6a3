//go:build !linux

package main

// keepSysmonAwake is Linux's (sysmon_linux.go): elsewhere the edge serves as it starts.
func keepSysmonAwake() {}
