package egress_test

import (
	"bytes"
	stdlog "log"
	"log/slog"
	"os"
	"strings"
	"testing"

	"spookat/worker/egress"
)

// What the standard library logs arrives as a structured record; net/http's line about an
// unasked answer arrives without the bytes it quoted.
func TestStdLogDropsWhatATargetSent(t *testing.T) {
	var out bytes.Buffer
	egress.StdLog(slog.New(slog.NewTextHandler(&out, nil)))
	t.Cleanup(func() { stdlog.SetOutput(os.Stderr); stdlog.SetFlags(stdlog.LstdFlags) })

	stdlog.Printf("Unsolicited response received on idle HTTP channel starting with %q; err=%v", `INFO {"server_id":"NSECRET"}`, nil)
	stdlog.Printf("http: TLS handshake error from 192.0.2.1:4711: EOF")
	got := out.String()
	if strings.Contains(got, "NSECRET") || strings.Contains(got, "INFO") {
		t.Fatalf("the target's bytes were logged: %s", got)
	}
	for _, want := range []string{"level=WARN", "does not speak HTTP", "TLS handshake error", `from="go standard library"`} {
		if !strings.Contains(got, want) {
			t.Errorf("log lacks %q: %s", want, got)
		}
	}
	if n := strings.Count(got, "\n"); n != 2 {
		t.Errorf("%d records, want 2: %s", n, got)
	}
}
