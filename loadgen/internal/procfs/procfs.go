// Package procfs reads the few /proc figures loadgen reports: CPU time of a process
// (utime+stime from /proc/<pid>/stat), its resident memory (/proc/<pid>/status) and which
// process listens on a TCP port. Linux only; every reader takes the file's bytes so the
// parsers can be tested on fixed inputs.
package procfs

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Stat is the part of /proc/<pid>/stat loadgen needs.
type Stat struct {
	Comm  string
	State byte
	UTime uint64 // clock ticks in user mode, every thread of the process
	STime uint64 // clock ticks in kernel mode
}

// Ticks is user plus system time in clock ticks.
func (s Stat) Ticks() uint64 { return s.UTime + s.STime }

// ParseStat parses the content of /proc/<pid>/stat. The command name (field 2) may hold
// spaces and parentheses, so the fields after it are found from the last ')'.
func ParseStat(data []byte) (Stat, error) {
	var s Stat
	open := bytes.IndexByte(data, '(')
	end := bytes.LastIndexByte(data, ')')
	if open < 0 || end < open {
		return s, errors.New("procfs: stat: no command name")
	}
	s.Comm = string(data[open+1 : end])
	fields := strings.Fields(string(data[end+1:]))
	// fields[0] is field 3 (state); utime is field 14, stime field 15.
	if len(fields) < 13 {
		return s, fmt.Errorf("procfs: stat: %d fields after the command name, want at least 13", len(fields))
	}
	if len(fields[0]) > 0 {
		s.State = fields[0][0]
	}
	var err error
	if s.UTime, err = strconv.ParseUint(fields[11], 10, 64); err != nil {
		return s, fmt.Errorf("procfs: stat: utime: %w", err)
	}
	if s.STime, err = strconv.ParseUint(fields[12], 10, 64); err != nil {
		return s, fmt.Errorf("procfs: stat: stime: %w", err)
	}
	return s, nil
}

// ReadStat reads /proc/<pid>/stat; pid 0 means this process.
func ReadStat(pid int) (Stat, error) {
	data, err := os.ReadFile(procPath(pid, "stat"))
	if err != nil {
		return Stat{}, err
	}
	return ParseStat(data)
}

// Mem is resident memory from /proc/<pid>/status, in bytes.
type Mem struct {
	RSS uint64 // VmRSS: resident now
	HWM uint64 // VmHWM: peak resident since the process started
}

// ParseStatus reads VmRSS and VmHWM from the content of /proc/<pid>/status.
func ParseStatus(data []byte) (Mem, error) {
	var m Mem
	var found int
	for line := range bytes.Lines(data) {
		var dst *uint64
		switch {
		case bytes.HasPrefix(line, []byte("VmRSS:")):
			dst = &m.RSS
		case bytes.HasPrefix(line, []byte("VmHWM:")):
			dst = &m.HWM
		default:
			continue
		}
		f := strings.Fields(string(line[6:]))
		if len(f) == 0 {
			return m, fmt.Errorf("procfs: status: empty %q", bytes.TrimSpace(line))
		}
		v, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			return m, fmt.Errorf("procfs: status: %w", err)
		}
		mult := uint64(1)
		if len(f) > 1 {
			switch strings.ToLower(f[1]) {
			case "kb":
				mult = 1 << 10
			case "mb":
				mult = 1 << 20
			case "gb":
				mult = 1 << 30
			}
		}
		*dst = v * mult
		found++
	}
	if found == 0 {
		return m, errors.New("procfs: status: no VmRSS or VmHWM (a kernel thread or a zombie?)")
	}
	return m, nil
}

// ReadMem reads /proc/<pid>/status; pid 0 means this process.
func ReadMem(pid int) (Mem, error) {
	data, err := os.ReadFile(procPath(pid, "status"))
	if err != nil {
		return Mem{}, err
	}
	return ParseStatus(data)
}

func procPath(pid int, name string) string {
	if pid == 0 {
		return "/proc/self/" + name
	}
	return "/proc/" + strconv.Itoa(pid) + "/" + name
}

var (
	clkOnce sync.Once
	clk     int64
)

// ClockTicks is the kernel's USER_HZ (sysconf(_SC_CLK_TCK)), read without cgo from the
// AT_CLKTCK entry of /proc/self/auxv; 100 when that cannot be read (its value on every
// mainstream Linux).
func ClockTicks() int64 {
	clkOnce.Do(func() {
		clk = 100
		if data, err := os.ReadFile("/proc/self/auxv"); err == nil {
			if v, ok := ParseAuxvClockTicks(data); ok {
				clk = v
			}
		}
	})
	return clk
}

// ParseAuxvClockTicks finds AT_CLKTCK (17) in a 64-bit little-endian auxiliary vector.
func ParseAuxvClockTicks(data []byte) (int64, bool) {
	const atClkTck = 17
	for i := 0; i+16 <= len(data); i += 16 {
		key := binary.LittleEndian.Uint64(data[i:])
		val := binary.LittleEndian.Uint64(data[i+8:])
		if key == 0 {
			break
		}
		if key == atClkTck && val > 0 {
			return int64(val), true
		}
	}
	return 0, false
}

// TicksToDuration converts clock ticks to time.
func TicksToDuration(ticks uint64) time.Duration {
	return time.Duration(ticks) * time.Second / time.Duration(ClockTicks())
}

// CPU reads a process's total CPU time (every thread, user plus system).
func CPU(pid int) (time.Duration, error) {
	s, err := ReadStat(pid)
	if err != nil {
		return 0, err
	}
	return TicksToDuration(s.Ticks()), nil
}

// ListenInodes parses /proc/net/tcp or /proc/net/tcp6 content and returns the socket inodes
// in state LISTEN on the given local port.
func ListenInodes(data []byte, port int) []uint64 {
	var out []uint64
	first := true
	for line := range bytes.Lines(data) {
		if first { // header
			first = false
			continue
		}
		f := strings.Fields(string(line))
		if len(f) < 10 {
			continue
		}
		local, state := f[1], f[3]
		if state != "0A" {
			continue
		}
		i := strings.LastIndexByte(local, ':')
		if i < 0 {
			continue
		}
		p, err := strconv.ParseUint(local[i+1:], 16, 32)
		if err != nil || int(p) != port {
			continue
		}
		ino, err := strconv.ParseUint(f[9], 10, 64)
		if err == nil && ino != 0 {
			out = append(out, ino)
		}
	}
	return out
}

// FindListener returns the pid of the process that listens on the local TCP port, by
// matching the socket's inode against every process's open files (needs permission to read
// the other process's /proc/<pid>/fd, i.e. the same user or root).
func FindListener(port int) (int, error) {
	var inodes []uint64
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		if data, err := os.ReadFile(f); err == nil {
			inodes = append(inodes, ListenInodes(data, port)...)
		}
	}
	if len(inodes) == 0 {
		return 0, fmt.Errorf("procfs: nothing listens on port %d", port)
	}
	want := make(map[string]bool, len(inodes))
	for _, ino := range inodes {
		want["socket:["+strconv.FormatUint(ino, 10)+"]"] = true
	}
	dirs, _ := filepath.Glob("/proc/[0-9]*/fd")
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(d)))
		if err != nil || pid == os.Getpid() {
			continue
		}
		ents, err := os.ReadDir(d)
		if err != nil {
			continue
		}
		for _, e := range ents {
			if link, err := os.Readlink(filepath.Join(d, e.Name())); err == nil && want[link] {
				return pid, nil
			}
		}
	}
	return 0, fmt.Errorf("procfs: port %d is listened on, but no readable process holds the socket", port)
}

// FindByName returns the pids whose command name (/proc/<pid>/comm) is name.
func FindByName(name string) []int {
	var out []int
	dirs, _ := filepath.Glob("/proc/[0-9]*/comm")
	for _, f := range dirs {
		data, err := os.ReadFile(f)
		if err != nil || strings.TrimSpace(string(data)) != name {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(f))); err == nil && pid != os.Getpid() {
			out = append(out, pid)
		}
	}
	return out
}

// CPUTimes is one line of /proc/stat ("cpu" or "cpuN"), in clock ticks.
type CPUTimes struct {
	Name                                                  string
	User, Nice, System, Idle, IOWait, IRQ, SoftIRQ, Steal uint64
}

// Total is every tick of the line (guest time is already inside user).
func (c CPUTimes) Total() uint64 {
	return c.User + c.Nice + c.System + c.Idle + c.IOWait + c.IRQ + c.SoftIRQ + c.Steal
}

// ParseProcStat reads the cpu lines of /proc/stat: the aggregate "cpu" first, then each CPU.
func ParseProcStat(data []byte) ([]CPUTimes, error) {
	var out []CPUTimes
	for line := range bytes.Lines(data) {
		if !bytes.HasPrefix(line, []byte("cpu")) {
			continue
		}
		f := strings.Fields(string(line))
		if len(f) < 9 {
			return nil, fmt.Errorf("procfs: /proc/stat: short line %q", bytes.TrimSpace(line))
		}
		var v [8]uint64
		for i := range v {
			n, err := strconv.ParseUint(f[i+1], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("procfs: /proc/stat: %w", err)
			}
			v[i] = n
		}
		out = append(out, CPUTimes{Name: f[0], User: v[0], Nice: v[1], System: v[2], Idle: v[3], IOWait: v[4], IRQ: v[5], SoftIRQ: v[6], Steal: v[7]})
	}
	if len(out) == 0 {
		return nil, errors.New("procfs: /proc/stat: no cpu lines")
	}
	return out, nil
}

// ReadProcStat reads /proc/stat.
func ReadProcStat() ([]CPUTimes, error) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return nil, err
	}
	return ParseProcStat(data)
}

// CPUUse is how a CPU spent an interval, in percent of it.
type CPUUse struct {
	CPU     string  `json:"cpu"`
	User    float64 `json:"user"`
	System  float64 `json:"system"`
	SoftIRQ float64 `json:"softirq"` // network processing (loopback included), charged to no process
	Steal   float64 `json:"steal"`   // taken by the hypervisor
	IOWait  float64 `json:"iowait"`
	Idle    float64 `json:"idle"`
}

// Use returns, per CPU line, the share of each state between two readings.
func Use(before, after []CPUTimes) []CPUUse {
	prev := make(map[string]CPUTimes, len(before))
	for _, b := range before {
		prev[b.Name] = b
	}
	var out []CPUUse
	for _, a := range after {
		b, ok := prev[a.Name]
		if !ok {
			continue
		}
		total := float64(a.Total() - b.Total())
		if total <= 0 {
			continue
		}
		pct := func(x, y uint64) float64 { return float64(int64(1000*float64(x-y)/total+0.5)) / 10 }
		out = append(out, CPUUse{
			CPU:     a.Name,
			User:    pct(a.User+a.Nice, b.User+b.Nice),
			System:  pct(a.System+a.IRQ, b.System+b.IRQ),
			SoftIRQ: pct(a.SoftIRQ, b.SoftIRQ),
			Steal:   pct(a.Steal, b.Steal),
			IOWait:  pct(a.IOWait, b.IOWait),
			Idle:    pct(a.Idle, b.Idle),
		})
	}
	return out
}
