package faults

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"spookat/edge/internal/edgetest"
	"spookat/edge/internal/store"
	"spookat/loadgen/mock"
	"spookat/schema/testkit"
)

// An external NATS server (one node, TLS and operator auth, as someone else would run it) is
// SIGKILLed under load and comes back 5 s later on its store. The edge and a bin/worker
// reconnect by themselves: visitors are acked from SQLite throughout (the publisher catches
// up from the outbox), the job consumers and the WORKERS bucket (kept in memory, so lost with
// the server) are made again, and every acked message reaches Slack.
func TestExternalNATSKilledAndRestarted(t *testing.T) {
	edgeBin, workerBin, natsBin := edgetest.Bin(t, "edge"), edgetest.Bin(t, "worker"), edgetest.Bin(t, "nats-server")
	dir := t.TempDir()
	data := dir + "/edge"
	auth := dir + "/auth.conf"
	edgetest.Admin(t, edgeBin, data, "nats-config", "-out", auth)
	tlsFiles := edgetest.NewTLS(t, dir)
	node := edgetest.StartCluster(t, natsBin, dir, edgetest.ClusterOptions{Nodes: 1, AuthConf: auth, TLS: &tlsFiles})[0]

	slack := mock.NewSlack(mock.SlackOptions{Latency: 5 * time.Millisecond})
	slackSrv := httptest.NewServer(slack)
	defer slackSrv.Close()

	natsFlags := func(creds string) []string {
		return []string{"-nats-url", node.URL(), "-nats-creds", creds, "-nats-tls-ca", tlsFiles.CA}
	}
	p := edgetest.StartProc(t, edgeBin, data, append(append(append([]string{"-worker", "none"},
		natsFlags(edgetest.Creds(t, edgeBin, data, "edge", ""))...),
		"-ack-wait", "2s", "-pinned-ttl", "3s", "-member-ttl", "2s"), edgetest.NoBrakes...)...)
	site := edgetest.AddSite(t, data, &store.Site{Name: "nats outage", Origins: []string{"http://site.test"},
		SlackToken: "xoxb-outage", SlackChannel: "COUTAGE01"})
	w := edgetest.StartWorker(t, workerBin, dir, "box1.example.com-1", append(natsFlags(edgetest.Creds(t, edgeBin, data, "worker", "box1.example.com-1")),
		"-slack-api", slackSrv.URL+"/api/", "-pull-expiry", "1s", "-stop-timeout", "3s", "-retry-base", "100ms", "-retry-max", "1s")...)

	tails := func() string {
		tail := func(s string) string { return s[max(0, len(s)-3000):] }
		return "edge:\n" + tail(p.Log()) + "\nworker:\n" + tail(w.Log()) + "\nnats:\n" + tail(node.Log())
	}
	var left []string // acked and not posted, at the last look
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%d acked messages not posted (e.g. %s)\n%s", len(left), strings.Join(left[:min(5, len(left))], " "), tails())
		}
	})
	l := startLoad(t, p.Addr, site.Key, 10, 20*time.Millisecond)
	testkit.WaitFor(t, "posts before the outage", 30*time.Second, func() bool { return slack.Count() >= 200 })

	node.Kill()
	killedAt, ackedAtKill := time.Now(), l.Acked()
	// The outage itself: a server that is gone for a while, not a condition to wait for.
	time.Sleep(5 * time.Second)
	ackedInOutage := l.Acked() - ackedAtKill
	node.Start()
	node.WaitHealthy(60 * time.Second)
	testkit.WaitFor(t, "acks after the restart", 30*time.Second, func() bool { return l.Acked() > ackedAtKill+ackedInOutage+200 })
	acked, errs := l.Stop()
	if len(errs) > 0 {
		t.Fatalf("visitors failed: %v", errs)
	}
	t.Logf("%d acked in all, %d during the 5 s outage", len(acked), ackedInOutage)
	if ackedInOutage == 0 {
		t.Fatal("no visitor was acked while NATS was down")
	}
	testkit.WaitFor(t, "every acked message posted", 60*time.Second, func() bool {
		left = missing(slack, acked)
		return len(left) == 0
	})
	t.Logf("every acked message posted %s after the kill", time.Since(killedAt).Round(100*time.Millisecond))
}
