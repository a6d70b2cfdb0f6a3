package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/ncruces/go-sqlite3"

	"spookat/edge/internal/edgetest"
	"spookat/edge/internal/files"
	"spookat/edge/internal/store"
	"spookat/schema"
	"spookat/schema/testkit"
)

// runOut runs the CLI in-process and returns what it printed on stdout (help) and its error.
func runOut(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var buf bytes.Buffer
	old := stdout
	stdout = &buf
	defer func() { stdout = old }()
	err := run(args)
	return buf.String(), err
}

func TestCLIHelpListsCommands(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"-help"}, {"help"}, {"help", "help"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			out, err := runOut(t, args...)
			if !errors.Is(err, flag.ErrHelp) {
				t.Fatalf("err = %v, want flag.ErrHelp (exit 0)", err)
			}
			for _, c := range commands() {
				if !strings.Contains(out, c.words+" ") {
					t.Errorf("help does not list %q", c.words)
				}
			}
			for _, f := range []string{"-addr", "-nats-monitor", "-write-queue"} {
				if !strings.Contains(out, f) {
					t.Errorf("help does not list serve's flag %s", f)
				}
			}
		})
	}
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"help", "operator", "passwd"}, []string{"usage: edge operator passwd", "-password-stdin", "-email"}},
		{[]string{"operator", "passwd", "-h"}, []string{"usage: edge operator passwd", "revokes every session"}},
		{[]string{"help", "site"}, []string{"edge site add", "edge site member remove"}},
		{[]string{"help", "creds", "revoke"}, []string{"-key", "-id"}},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			out, err := runOut(t, c.args...)
			if !errors.Is(err, flag.ErrHelp) {
				t.Fatalf("err = %v, want flag.ErrHelp", err)
			}
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Errorf("output does not contain %q:\n%s", w, out)
				}
			}
		})
	}
}

func TestCLIUnknownFlagIsOneLine(t *testing.T) {
	cases := [][]string{{}}
	for _, c := range commands() {
		if c.words != "help" {
			cases = append(cases, strings.Fields(c.words))
		}
	}
	for _, words := range cases {
		name := strings.TrimSpace("edge " + strings.Join(words, " "))
		t.Run(name, func(t *testing.T) {
			out, err := runOut(t, append(words, "-nope")...)
			want := "flag provided but not defined: -nope\nrun '" + name + " -h' for usage"
			if err == nil || err.Error() != want {
				t.Errorf("error = %q, want %q", err, want)
			}
			if out != "" {
				t.Errorf("printed %d bytes of usage on a mistake", len(out))
			}
		})
	}
}

func TestCLIUnknownCommands(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"serve"}, []string{`unknown command "serve"`, "edge help"}},
		{[]string{"site"}, []string{"'edge site' needs a command", "edge site add", "edge site member add"}},
		{[]string{"site", "delete"}, []string{"unknown command 'edge site delete'", "edge site list"}},
		{[]string{"operator", "reset"}, []string{"unknown command 'edge operator reset'", "edge operator passwd"}},
		{[]string{"creds"}, []string{"'edge creds' needs a command", "edge creds worker"}},
		{[]string{"help", "nope"}, []string{"no such command 'edge nope'", "edge help"}},
		{[]string{"-data", "x", "stray"}, []string{`unexpected argument "stray"`, "run 'edge -h'"}},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			_, err := runOut(t, c.args...)
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// Every check names the flag and shows a value that works. None of these start anything:
// validation comes before the data directory is touched.
func TestCLIServeFlagValues(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"-addr", "8080"}, []string{"-addr", "did you mean :8080"}},
		{[]string{"-addr", "localhost"}, []string{"-addr", ":8080"}},
		{[]string{"-nats-listen", "4222"}, []string{"-nats-listen", "did you mean :4222"}},
		{[]string{"-nats-monitor", "nowhere"}, []string{"-nats-monitor", "host:port", "empty: off"}},
		{[]string{"-pprof", "6060"}, []string{"-pprof", ":6060"}},
		{[]string{"-public-url", "shop.example"}, []string{"-public-url", "https://shop.example"}},
		{[]string{"-public-url", "ftp://shop.example"}, []string{"-public-url", "http(s)"}},
		{[]string{"-log-level", "loud"}, []string{"-log-level", "debug, info, warn or error"}},
		{[]string{"-sync", "sometimes"}, []string{"-sync", "normal or full"}},
		{[]string{"-worker", "two"}, []string{"-worker", "inproc or none"}},
		{[]string{"-nats-replicas", "0"}, []string{"-nats-replicas", "1 to 5"}},
		{[]string{"-nats-replicas", "7"}, []string{"-nats-replicas", "1 to 5"}},
		{[]string{"-write-queue", "-5"}, []string{"-write-queue", "at least 1", "-write-queue 50000"}},
		{[]string{"-write-queue", "0"}, []string{"-write-queue", "at least 1"}},
		{[]string{"-conn-msg-rate", "-1"}, []string{"-conn-msg-rate", "at least 0"}},
		{[]string{"-site-msg-burst", "0.5"}, []string{"-site-msg-burst", "at least 1", "-site-msg-rate 0"}},
		{[]string{"-flood-threshold", "-1"}, []string{"-flood-threshold", "0: off"}},
		{[]string{"-flood-divisor", "1"}, []string{"-flood-divisor", "at least 2", "-flood-divisor 10"}},
		{[]string{"-flood-max-level", "0"}, []string{"-flood-max-level", "at least 1"}},
		{[]string{"-chat-inflight", "0"}, []string{"-chat-inflight", "at least 1"}},
		{[]string{"-max-attempts", "0"}, []string{"-max-attempts", "at least 1"}},
		{[]string{"-smtp-tls", "yes"}, []string{"-smtp-tls", "starttls"}},
		{[]string{"-smtp-port", "70000"}, []string{"-smtp-port", "1 to 65535"}},
		{[]string{"-ack-wait", "0s"}, []string{"-ack-wait", "above zero", "30s"}},
		{[]string{"-pinned-ttl", "-5s"}, []string{"-pinned-ttl", "above zero"}},
		{[]string{"-retry-base", "2h"}, []string{"-retry-max", "-retry-base"}},
		{[]string{"-write-queue", "many"}, []string{"-write-queue", "invalid value"}},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			dir := t.TempDir()
			_, err := runOut(t, append([]string{"-data", dir}, c.args...)...)
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 0 {
				t.Errorf("a refused command line touched the data directory: %v", entries)
			}
		})
	}
}

// A busy port is named by the flag that chose it.
func TestCLIBusyPortNamesItsFlag(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	testkit.NoErr(t, err)
	defer busy.Close()
	b := busy.Addr().String()
	for _, c := range []struct {
		flag string
		args []string
	}{
		{"-nats-monitor", []string{"-addr", edgetest.FreePort(t), "-nats-listen", edgetest.FreePort(t), "-nats-monitor", b}},
		{"-nats-listen", []string{"-addr", edgetest.FreePort(t), "-nats-listen", b, "-nats-monitor", ""}},
		{"-addr", []string{"-addr", b, "-nats-listen", edgetest.FreePort(t), "-nats-monitor", ""}},
		{"-metrics-addr", []string{"-addr", edgetest.FreePort(t), "-metrics-addr", b, "-nats-listen", edgetest.FreePort(t), "-nats-monitor", ""}},
	} {
		t.Run(c.flag, func(t *testing.T) {
			_, err := runOut(t, append([]string{"-data", t.TempDir(), "-worker", "none"}, c.args...)...)
			env := "SPOOKAT_" + strings.ToUpper(strings.ReplaceAll(c.flag[1:], "-", "_"))
			if err == nil || !strings.Contains(err.Error(), c.flag+" ") || !strings.Contains(err.Error(), b) || !strings.Contains(err.Error(), env) {
				t.Errorf("error %v, want it to name %s %s and %s", err, c.flag, b, env)
			}
		})
	}
}

// withStdin runs fn with standard input reading s.
func withStdin(t *testing.T, s string, fn func()) {
	t.Helper()
	r, w, err := os.Pipe()
	testkit.NoErr(t, err)
	w.WriteString(s)
	w.Close()
	old := os.Stdin
	os.Stdin = r
	defer func() { os.Stdin, _ = old, r.Close() }()
	fn()
}

func TestCLISiteAndOperatorChecks(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"site", "add", "-name", "Shop"}, []string{"-origin is required", "https://shop.example"}},
		{[]string{"site", "add", "-name", "Shop", "-origin", "shop.example"}, []string{"-origin", "scheme://host", "https://shop.example"}},
		{[]string{"site", "add", "-name", "Shop", "-origin", "https://shop.example/chat"}, []string{"-origin", "no path", "https://shop.example"}},
		{[]string{"site", "add", "-name", "Shop", "-origin", "https://shop.example:443"}, []string{"-origin", "default port"}},
		{[]string{"site", "add", "-name", "Shop", "-origin", "*", "-slack-token", "xoxb-1", "-slack-channel", "#support"}, []string{"-slack-channel", "C0123ABCD"}},
		{[]string{"site", "add", "-name", "Shop", "-origin", "*", "-slack-channel", "C0123ABCD"}, []string{"-slack-token", "go together"}},
		{[]string{"site", "add", "-origin", "*"}, []string{"-name is required"}},
		{[]string{"operator", "add", "-email", "ann@shop.test", "-password-stdin"}, []string{"-site is required", "edge site list"}},
		{[]string{"operator", "add", "-site", "st_x", "-password-stdin"}, []string{"-email is required", "ann@shop.example"}},
		{[]string{"operator", "add", "-email", "ann@shop.test", "-site", "st_x"}, []string{"-password-stdin"}},
		{[]string{"operator", "passwd", "-password-stdin"}, []string{"-email is required"}},
		{[]string{"operator", "remove"}, []string{"-email is required"}},
		{[]string{"site", "member", "remove", "-email", "ann@shop.test"}, []string{"-site is required"}},
		{[]string{"operator", "add", "-email", "ann@", "-site", "st_x", "-password-stdin"}, []string{"-email", `"ann@" is not an email address`}},
		{[]string{"operator", "add", "-email", "@shop.example", "-site", "st_x", "-password-stdin"}, []string{"-email", "not an email address"}},
		{[]string{"operator", "add", "-email", "ann shop@x.y", "-site", "st_x", "-password-stdin"}, []string{"-email", "not an email address"}},
		{[]string{"operator", "passwd", "-email", "ann@", "-password-stdin"}, []string{"not an email address"}},
		{[]string{"site", "add", "-name", "Shop", "-origin", "*", "-notify-email", "not-an-email"}, []string{"-notify-email", "not an email address"}},
		{[]string{"site", "add", "-name", "Shop", "-origin", "*", "-slack-token", "xoxb-…", "-slack-channel", "C0123ABCD"}, []string{"-slack-token", "placeholder"}},
		{[]string{"site", "add", "-name", "Shop", "-origin", "*", "-slack-token", "xoxb-12 34", "-slack-channel", "C0123ABCD"}, []string{"-slack-token", "not a Slack bot token"}},
		// A data directory without a database is not made one by a typo in -data.
		{[]string{"site", "list"}, []string{"-data", "holds no spookat database", "edge demo -data"}},
		{[]string{"site", "add", "-name", "Shop", "-origin", "*"}, []string{"-data", "holds no spookat database"}},
		{[]string{"operator", "list"}, []string{"holds no spookat database"}},
		{[]string{"creds", "worker", "-id", "w1", "-out", "/dev/null"}, []string{"holds no spookat database"}},
		{[]string{"creds", "list"}, []string{"holds no spookat database"}},
		{[]string{"creds", "revoke", "-id", "w1"}, []string{"holds no spookat database"}},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			_, err := runOut(t, append(c.args, "-data", dir)...)
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("refused commands touched the data directory: %v", entries)
	}
}

// The operator commands on a data directory no edge holds (the file is opened directly).
func TestCLIOperatorLifecycleOnTheFile(t *testing.T) {
	dir := newDataDir(t)
	var site struct {
		Key     string   `json:"key"`
		Targets []string `json:"targets"`
	}
	out := captureStdout(t, func() error {
		return run([]string{"site", "add", "-data", dir, "-name", "Shop", "-origin", "https://shop.example/",
			"-notify-email", "desk@shop.example", "-json"})
	})
	if err := json.Unmarshal([]byte(out), &site); err != nil || site.Key == "" || len(site.Targets) != 1 || site.Targets[0] != "email:desk@shop.example" {
		t.Fatalf("site add printed %q (%v): want its key and delivery targets, as site list shows them", out, err)
	}
	// The same command twice is most likely a mistake: said, and done only with -force.
	again := []string{"site", "add", "-data", dir, "-name", "shop", "-origin", "https://shop.example", "-json"}
	if err := run(again); err == nil || !strings.Contains(err.Error(), "-force") || !strings.Contains(err.Error(), site.Key) {
		t.Errorf("a second site with the same name and origin: %v, want a refusal naming the first and -force", err)
	}
	captureStdout(t, func() error { return run(append(again, "-force")) })
	add := []string{"operator", "add", "-data", dir, "-email", "ann@shop.test", "-site", site.Key, "-password-stdin"}
	withStdin(t, "first-password\n", func() {
		testkit.NoErr(t, run(add))
	})
	withStdin(t, "other-password\n", func() {
		err := run(add)
		if err == nil || !strings.Contains(err.Error(), "edge operator passwd -email ann@shop.test -password-stdin") {
			t.Errorf("operator add on an existing email: %v", err)
		}
	})
	withStdin(t, "second-password\n", func() {
		testkit.NoErr(t, run([]string{"operator", "passwd", "-data", dir, "-email", "ann@shop.test", "-password-stdin"}))
	})
	testkit.NoErr(t, run([]string{"site", "member", "remove", "-data", dir, "-site", site.Key, "-email", "ann@shop.test"}))
	var list []struct {
		Email    string   `json:"email"`
		SiteKeys []string `json:"site_keys"`
	}
	out = captureStdout(t, func() error { return run([]string{"operator", "list", "-data", dir, "-json"}) })
	if err := json.Unmarshal([]byte(out), &list); err != nil || len(list) != 1 || len(list[0].SiteKeys) != 0 {
		t.Fatalf("operator list after member remove: %q, %v", out, err)
	}
	testkit.NoErr(t, run([]string{"site", "member", "add", "-data", dir, "-site", site.Key, "-email", "ann@shop.test"}))
	testkit.NoErr(t, run([]string{"operator", "remove", "-data", dir, "-email", "ann@shop.test"}))
	err := run([]string{"operator", "passwd", "-data", dir, "-email", "ann@shop.test", "-password-stdin"})
	if err == nil {
		t.Error("passwd of a removed operator accepted")
	}
	out = captureStdout(t, func() error { return run([]string{"operator", "list", "-data", dir, "-json"}) })
	if strings.TrimSpace(out) != "[]" {
		t.Errorf("operator list after remove: %q", out)
	}
}

// newDataDir is a data directory with a database, as an edge leaves it.
func newDataDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	st, err := store.Open(dir, store.Options{Readers: 1})
	testkit.NoErr(t, err)
	testkit.NoErr(t, st.Close())
	return dir
}

// captureStdout runs fn with os.Stdout going to a file and returns what it wrote.
func captureStdout(t *testing.T, fn func() error) string {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "stdout"))
	testkit.NoErr(t, err)
	old := os.Stdout
	os.Stdout = f
	err = fn()
	os.Stdout = old
	testkit.NoErr(t, err)
	b, _ := os.ReadFile(f.Name())
	return string(b)
}

// The binary itself: help exits 0 on stdout, a mistake exits 1 with two lines on stderr.
func TestCLIBinaryExitCodes(t *testing.T) {
	bin := edgetest.Bin(t, "edge")
	for _, c := range []struct {
		args        []string
		code        int
		stdoutHas   string
		stderrLines int
	}{
		{[]string{"-h"}, 0, "operator passwd", 0},
		{[]string{"help"}, 0, "site member remove", 0},
		{[]string{"-x"}, 1, "", 2},
		{[]string{"operator", "add", "-x"}, 1, "", 2},
		{[]string{"-log-level", "loud"}, 1, "", 1},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			cmd := exec.Command(bin, c.args...)
			var o, e bytes.Buffer
			cmd.Stdout, cmd.Stderr = &o, &e
			err := cmd.Run()
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			}
			if code != c.code {
				t.Errorf("exit %d, want %d (stderr %q)", code, c.code, e.String())
			}
			if !strings.Contains(o.String(), c.stdoutHas) {
				t.Errorf("stdout lacks %q", c.stdoutHas)
			}
			if n := strings.Count(e.String(), "\n"); n != c.stderrLines {
				t.Errorf("stderr has %d lines, want %d: %q", n, c.stderrLines, e.String())
			}
		})
	}
}

// Every flag's value placeholder is one word: Go's flag package takes a back-quoted word of
// the usage as the placeholder, and "-data edge seed" reads as nonsense.
func TestCLIFlagPlaceholdersAreOneWord(t *testing.T) {
	placeholder := regexp.MustCompile(`(?m)^  -[a-z-]+ ([^\n]*)$`)
	cases := [][]string{{"-h"}}
	for _, c := range commands() {
		if c.words != "help" {
			cases = append(cases, append(strings.Fields(c.words), "-h"))
		}
	}
	for _, args := range cases {
		out, err := runOut(t, args...)
		if !errors.Is(err, flag.ErrHelp) {
			t.Errorf("edge %s: %v", strings.Join(args, " "), err)
		}
		for _, m := range placeholder.FindAllStringSubmatch(out, -1) {
			if strings.Contains(m[1], " ") {
				t.Errorf("edge %s: a flag's placeholder is several words: %q", strings.Join(args, " "), m[0])
			}
		}
	}
}

// The disaster drill of the RUNBOOK, as its commands: a backup of a serving edge, a restore
// elsewhere, which refuses the running edge's directory and answers what to do.
func TestCLIBackupAndRestore(t *testing.T) {
	bin := edgetest.Bin(t, "edge")
	data := t.TempDir()
	// No worker: the site posts to Slack, and only the recorded thread matters here.
	p := edgetest.StartProc(t, bin, data, "-worker", "none")
	site := edgetest.AddSite(t, data, &store.Site{Name: "drill", Origins: []string{"http://site.test"},
		SlackToken: "xoxb-drill-1", SlackChannel: "CDRILL001", DiscordWebhook: "https://discord.com/api/webhooks/1/drill"})
	c := edgetest.Dial(t, p.Addr, site.Key, "")
	ack, err := c.SendAck("d-1", "before the backup")
	testkit.NoErr(t, err)
	// The conversation's Slack thread, as a worker's result records it (written with the
	// edge stopped: it is the only writer), then the edge serves again.
	_, err = p.Stop(10 * time.Second)
	testkit.NoErr(t, err)
	db, err := store.OpenConn(filepath.Join(data, store.FileName), sqlite3.OPEN_READWRITE)
	testkit.NoErr(t, err)
	testkit.NoErr(t, db.Exec(fmt.Sprintf(`UPDATE conversations SET slack_thread = '1712345678.000100', discord_thread = '1234567890123' WHERE id = %d`, *ack.ConversationID)))
	testkit.NoErr(t, db.Close())
	edgetest.StartProc(t, bin, data, "-worker", "none")
	workerCreds := edgetest.Creds(t, bin, data, "worker", "box9-1") // given out before the backup
	archive := filepath.Join(t.TempDir(), "spookat.tar.gz")
	out := edgetest.Admin(t, bin, data, "backup", "-out", archive)
	if !regexp.MustCompile(`^backup .*spookat.tar.gz: 1 messages \(last id \d+\), 0 attachment files, schema \d+, \d+ bytes, taken `).MatchString(out) {
		t.Errorf("backup said %q", out)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"backup"}, "-out is required"},
		{[]string{"restore", "-from", archive}, "-from and -data are required"},
		{[]string{"restore", "-from", archive, "-data", data}, "an edge is running on"},
		{[]string{"restore", "-from", filepath.Join(data, store.FileName), "-data", t.TempDir()}, "not a spookat backup"},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			b, err := exec.Command(bin, c.args...).CombinedOutput()
			if err == nil || !strings.Contains(string(b), c.want) {
				t.Fatalf("%v: %s, want an error saying %q", err, b, c.want)
			}
		})
	}
	restored := t.TempDir()
	b, err := exec.Command(bin, "restore", "-from", archive, "-data", restored).CombinedOutput()
	if err != nil || !strings.Contains(string(b), "start the edge with -data "+restored) {
		t.Fatalf("restore: %v %s", err, b)
	}
	list := edgetest.Admin(t, bin, restored, "site", "list")
	if !strings.Contains(list, site.Key) {
		t.Errorf("the restored directory lacks the site: %s", list)
	}
	// The restored edge has a new JetStream: THREADS is refilled from the database, so a
	// reply goes on in the conversation's Slack thread.
	r := edgetest.StartProc(t, bin, restored, "-worker", "none")
	js := edgetest.ConnectOps(t, bin, restored, "nats://"+r.NATSAddr)
	stream, err := js.Stream(context.Background(), "KV_"+schema.BucketThreads)
	testkit.NoErr(t, err)
	m, err := stream.GetLastMsgForSubject(context.Background(), "$KV."+schema.BucketThreads+"."+schema.ThreadKey(schema.TargetSlack, site.ID, *ack.ConversationID))
	if err != nil || string(m.Data) != "1712345678.000100" {
		t.Fatalf("THREADS after the restore: %v %v", m, err)
	}
	// And the Discord thread, both ways: the worker posts into it, and its gateway knows a
	// reply written there is the site's.
	for key, want := range map[string]string{
		schema.ThreadKey(schema.TargetDiscord, site.ID, *ack.ConversationID): "1234567890123",
		schema.DiscordThreadSiteKey("1234567890123"):                         strconv.FormatInt(site.ID, 10),
	} {
		m, err := stream.GetLastMsgForSubject(context.Background(), "$KV."+schema.BucketThreads+"."+key)
		if err != nil || string(m.Data) != want {
			t.Fatalf("THREADS %s after the restore: %v %v, want %s", key, m, err, want)
		}
	}
	// A worker's credentials from before the backup still let it in: same NATS authority.
	nc, err := nats.Connect("nats://"+r.NATSAddr, nats.UserCredentials(workerCreds))
	if err != nil {
		t.Fatalf("a worker's credentials after the restore: %v", err)
	}
	nc.Close()

	// The installation's audit log (edge audit): the credentials and the backup where they were
	// made; in the restored directory, the worker's credentials (in the copy), the restore
	// naming its archive, the ops credentials ConnectOps issued, a revocation.
	edgetest.Admin(t, bin, restored, "creds", "revoke", "-id", "box9-1")
	for _, c := range []struct {
		dir  string
		want string
	}{
		{data, "backup,creds_issued"},
		{restored, "creds_revoked,creds_issued,restore,creds_issued"},
	} {
		var log []store.AuditEntry
		testkit.NoErr(t, json.Unmarshal([]byte(edgetest.Admin(t, bin, c.dir, "audit", "-json")), &log))
		var actions []string
		for _, e := range log {
			actions = append(actions, string(e.Action))
			if e.Actor != store.ActorCLI {
				t.Errorf("entry %+v", e)
			}
			if e.Action == store.AuditRestore && e.Detail["file"] != archive {
				t.Errorf("the restore names %v, not %s", e.Detail["file"], archive)
			}
		}
		if strings.Join(actions, ",") != c.want {
			t.Errorf("%s: audit %v, want %s", c.dir, actions, c.want)
		}
	}
	if out := edgetest.Admin(t, bin, restored, "audit", "-action", "creds_issued"); !strings.Contains(out, `"worker_id":"box9-1"`) || strings.Contains(out, "restore") {
		t.Errorf("edge audit -action creds_issued printed:\n%s", out)
	}
}

// edge visitor export and erase on a data directory no edge serves: the person's document and
// their attachment in one archive, nobody else's words; a file there already is not
// overwritten; erase wants -yes, then the person, their file on disk and a second export go.
func TestCLIVisitorExportAndErase(t *testing.T) {
	dir := newDataDir(t)
	s, err := store.Open(dir, store.Options{})
	testkit.NoErr(t, err)
	ctx := context.Background()
	site := &store.Site{Name: "Shop", Origins: []string{"*"}}
	testkit.NoErr(t, s.Write(ctx, func(tx *store.Tx) error { return tx.AddSite(site) }))
	fdir := files.Dir{Root: filepath.Join(dir, "files")}
	sum, err := fdir.Put("K0123456789abcdefghijk", []byte("%PDF-1.4 the receipt"))
	testkit.NoErr(t, err)
	f := &store.File{Key: "K0123456789abcdefghijk", SiteID: site.ID, TokenHash: []byte("ada"), Name: "receipt.pdf", Type: "application/pdf", Size: 20, SHA256: sum}
	testkit.NoErr(t, s.Write(ctx, func(tx *store.Tx) error { return tx.InsertFile(f) }))
	say := func(visitor, text string, file *store.File) {
		ch := make(chan store.MessageResult, 1)
		testkit.NoErr(t, s.SubmitMessage(&store.MessageRequest{SiteID: site.ID, TokenHash: []byte(visitor), Author: schema.AuthorVisitor, Text: text,
			ClientID: text, File: file, Done: func(r store.MessageResult) { ch <- r }}))
		r := <-ch
		testkit.NoErr(t, r.Err)
		testkit.NoErr(t, s.Write(ctx, func(tx *store.Tx) error {
			return tx.Exec(`UPDATE visitors SET email = ? WHERE id = ?`, visitor+"@example.com", r.VisitorID)
		}))
	}
	say("ada", "Here is my receipt", f)
	say("bob", "Bob's words", nil)
	testkit.NoErr(t, s.Close())

	out := filepath.Join(t.TempDir(), "ada.tar.gz")
	printed := captureStdout(t, func() error {
		return run([]string{"visitor", "export", "-data", dir, "-site", site.Key, "-email", "ADA@example.com", "-out", out})
	})
	if !strings.Contains(printed, "1 conversations, 1 attachments") {
		t.Errorf("printed %q", printed)
	}
	raw, err := os.ReadFile(out)
	testkit.NoErr(t, err)
	gz, err := gzip.NewReader(bytes.NewReader(raw))
	testkit.NoErr(t, err)
	tr := tar.NewReader(gz)
	got := map[string]string{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		testkit.NoErr(t, err)
		b, _ := io.ReadAll(tr)
		got[h.Name] = string(b)
	}
	if !strings.Contains(got["person.json"], "Here is my receipt") || strings.Contains(got["person.json"], "Bob's words") ||
		got["files/K0123456789abcdefghijk-receipt.pdf"] != "%PDF-1.4 the receipt" {
		t.Fatalf("archive: %v", got)
	}
	if err := run([]string{"visitor", "export", "-data", dir, "-site", site.Key, "-email", "ada@example.com", "-out", out}); err == nil {
		t.Error("an existing -out was overwritten")
	}

	erase := []string{"visitor", "erase", "-data", dir, "-site", site.Key, "-email", "ada@example.com"}
	if err := run(erase); err == nil || !strings.Contains(err.Error(), "-yes") {
		t.Errorf("erase without -yes: %v", err)
	}
	printed = captureStdout(t, func() error { return run(append(erase, "-yes")) })
	if !strings.Contains(printed, "erased 1 visitor records, 1 conversations, 1 messages, 1 files") {
		t.Errorf("erase printed %q", printed)
	}
	if _, err := os.Stat(filepath.Join(dir, "files", "K0", "K0123456789abcdefghijk")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the attachment is still on disk: %v", err)
	}
	if err := run([]string{"visitor", "export", "-data", dir, "-site", site.Key, "-email", "ada@example.com", "-out", out + "2"}); err == nil || !strings.Contains(err.Error(), "no visitor") {
		t.Errorf("export after the erasure: %v", err)
	}
	captureStdout(t, func() error {
		return run([]string{"site", "retention", "-data", dir, "-site", site.Key, "-days", "30"})
	})
	// The command line's actions are in the site's audit log, as "cli", naming no one.
	s, err = store.Open(dir, store.Options{})
	testkit.NoErr(t, err)
	defer s.Close()
	log, err := s.AuditLog(context.Background(), site.ID, store.AuditQuery{})
	testkit.NoErr(t, err)
	var actions []string
	for _, e := range log {
		actions = append(actions, string(e.Action))
		if e.Actor != store.ActorCLI || strings.Contains(fmt.Sprint(e.Detail), "ada@") {
			t.Errorf("entry %+v", e)
		}
	}
	if strings.Join(actions, ",") != "retention_changed,person_erased,person_exported" {
		t.Errorf("audit: %v", actions)
	}
}
