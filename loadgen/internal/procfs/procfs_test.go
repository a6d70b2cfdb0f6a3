package procfs

import (
	"encoding/binary"
	"os"
	"testing"
	"time"

	"spookat/schema/testkit"
)

func TestParseStat(t *testing.T) {
	// A real line, with a command name holding a space and a parenthesis.
	line := "4242 (my (edge) x) S 1 4242 4242 0 -1 4194560 12345 0 0 0 1523 377 0 0 20 0 9 0 123456 1234567890 3456 18446744073709551615 1 1 0 0 0 0 0 0 2143420159 0 0 0 17 1 0 0 0 0 0\n"
	s, err := ParseStat([]byte(line))
	testkit.NoErr(t, err)
	if s.Comm != "my (edge) x" || s.State != 'S' || s.UTime != 1523 || s.STime != 377 || s.Ticks() != 1900 {
		t.Fatalf("got %+v", s)
	}
	if _, err := ParseStat([]byte("12 (x) S 1 2")); err == nil {
		t.Fatal("short line: want error")
	}
	if _, err := ParseStat([]byte("garbage")); err == nil {
		t.Fatal("no comm: want error")
	}
}

func TestParseStatus(t *testing.T) {
	data := "Name:\tedge\nUmask:\t0022\nState:\tS (sleeping)\nVmPeak:\t 1300000 kB\nVmHWM:\t   98765 kB\nVmRSS:\t   51200 kB\nThreads:\t9\n"
	m, err := ParseStatus([]byte(data))
	testkit.NoErr(t, err)
	if m.HWM != 98765*1024 || m.RSS != 51200*1024 {
		t.Fatalf("got %+v", m)
	}
	if _, err := ParseStatus([]byte("Name:\tkthreadd\n")); err == nil {
		t.Fatal("kernel thread: want error")
	}
}

func TestParseAuxvClockTicks(t *testing.T) {
	var buf []byte
	for _, kv := range [][2]uint64{{6, 4096}, {17, 250}, {0, 0}} {
		buf = binary.LittleEndian.AppendUint64(buf, kv[0])
		buf = binary.LittleEndian.AppendUint64(buf, kv[1])
	}
	if v, ok := ParseAuxvClockTicks(buf); !ok || v != 250 {
		t.Fatalf("got %d %v", v, ok)
	}
	if _, ok := ParseAuxvClockTicks(buf[:16]); ok {
		t.Fatal("no AT_CLKTCK: want not found")
	}
}

func TestListenInodes(t *testing.T) {
	data := `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 31337 1 0000000000000000 100 0 0 10 0
   1: 0100007F:1F90 0100007F:D2F0 01 00000000:00000000 00:00000000 00000000     0        0 31338 1 0000000000000000 20 4 30 10 -1
   2: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 999 1 0000000000000000 100 0 0 10 0
`
	got := ListenInodes([]byte(data), 8080)
	if len(got) != 1 || got[0] != 31337 {
		t.Fatalf("got %v", got)
	}
}

func TestSelf(t *testing.T) {
	if ClockTicks() <= 0 {
		t.Fatal("clock ticks")
	}
	end := time.Now().Add(30 * time.Millisecond)
	for time.Now().Before(end) {
	}
	if _, err := CPU(0); err != nil {
		t.Fatal(err)
	}
	m, err := ReadMem(os.Getpid())
	if err != nil || m.RSS == 0 || m.HWM < m.RSS {
		t.Fatalf("%+v %v", m, err)
	}
}

func TestProcStatUse(t *testing.T) {
	before := "cpu  100 0 50 800 10 0 20 0 0 0\ncpu0 60 0 30 380 5 0 15 0 0 0\ncpu1 40 0 20 420 5 0 5 0 0 0\nintr 1 2 3\nctxt 99\n"
	after := "cpu  250 0 100 850 10 0 80 10 0 0\ncpu0 170 0 55 380 5 0 70 10 0 0\ncpu1 80 0 45 470 5 0 10 0 0 0\n"
	b, err := ParseProcStat([]byte(before))
	if err != nil || len(b) != 3 || b[1].Name != "cpu0" || b[1].SoftIRQ != 15 {
		t.Fatalf("%+v %v", b, err)
	}
	a, _ := ParseProcStat([]byte(after))
	u := Use(b, a)
	if len(u) != 3 {
		t.Fatalf("%+v", u)
	}
	// cpu0: 200 ticks: user 110, system 25, softirq 55, steal 10, idle 0.
	c0 := u[1]
	if c0.CPU != "cpu0" || c0.User != 55 || c0.System != 12.5 || c0.SoftIRQ != 27.5 || c0.Steal != 5 || c0.Idle != 0 {
		t.Fatalf("cpu0 %+v", c0)
	}
	if _, err := ParseProcStat([]byte("intr 1\n")); err == nil {
		t.Fatal("no cpu lines: want error")
	}
}
