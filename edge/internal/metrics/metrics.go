// Package metrics defines the edge's Prometheus metrics, served on /metrics.
package metrics

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Set is the edge's metrics and their registry (the worker has its own).
type Set struct {
	Registry       *prometheus.Registry
	MessagesSaved  prometheus.Counter
	AckLatency     prometheus.Histogram
	CommitBatch    prometheus.Histogram
	CommitDuration prometheus.Histogram
	OpenSockets    prometheus.Gauge
	FrameErrors    *prometheus.CounterVec
	// FilesStored counts attachments taken (refused ones are FrameErrors by code).
	FilesStored    prometheus.Counter
	ResultsRecords *prometheus.CounterVec
	// ResultsRejected counts results refused because they do not match what the edge
	// published, by reason (see results.Reasons).
	ResultsRejected *prometheus.CounterVec
	// Inbound counts what the workers heard from outside (INBOUND), by outcome (see
	// inbound.Outcomes).
	Inbound *prometheus.CounterVec
	// SocketRefusals counts connections refused with 503 because -max-sockets were open.
	SocketRefusals prometheus.Counter
	// LoginFailures counts wrong passwords, by operator id ("unknown": no operator has the
	// email): an account someone is guessing shows here.
	LoginFailures *prometheus.CounterVec
	// NATSRefused counts the clients the embedded NATS turned away, by reason (credentials,
	// tls): a worker with revoked or foreign credentials, or without the CA, shows here.
	NATSRefused *prometheus.CounterVec
	// SocketsPaced counts new widget sockets that waited for their turn under -socket-rate,
	// and those refused because the wait would have been too long.
	SocketsPaced *prometheus.CounterVec
	// AcceptErrors counts failed accepts (out of file descriptors), each retried.
	AcceptErrors prometheus.Counter
	// Retention: passes over the conversations, and what they deleted (conversations,
	// messages, files).
	RetentionPasses prometheus.Counter
	RetentionPurged *prometheus.CounterVec
	// Streams' use of their byte budgets, as last read from JetStream (see SetStream).
	StreamBytes    *prometheus.GaugeVec
	StreamMaxBytes *prometheus.GaugeVec
	StreamMessages *prometheus.GaugeVec
}

// New registers every metric, the Go runtime's (scheduler latency included: loadgen reads
// go_sched_latencies_seconds as the edge's "event loop lag") and the process's.
func New() *Set {
	reg := prometheus.NewRegistry()
	m := &Set{
		Registry: reg,
		MessagesSaved: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "spookat_messages_saved_total", Help: "Messages committed to SQLite.",
		}),
		AckLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "spookat_ack_latency_seconds", Help: "From a message frame read to its ack queued, after commit.",
			Buckets: []float64{.0001, .00025, .0005, .001, .002, .003, .005, .01, .025, .05, .1, .25, .5, 1},
		}),
		CommitBatch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "spookat_commit_batch_size", Help: "Requests committed together by one transaction.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 12),
		}),
		CommitDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "spookat_commit_duration_seconds", Help: "Time of one group commit, statements and COMMIT.",
			Buckets: []float64{.0001, .00025, .0005, .001, .002, .005, .01, .025, .05, .1},
		}),
		OpenSockets: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "spookat_open_sockets", Help: "Open widget websockets.",
		}),
		FrameErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "spookat_frame_errors_total", Help: "Error frames sent, by code.",
		}, []string{"code"}),
		FilesStored: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "spookat_files_stored_total", Help: "Attachments uploaded and stored.",
		}),
		ResultsRecords: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "spookat_delivery_results_total", Help: "Delivery results recorded from the RESULTS stream, by target and status.",
		}, []string{"target", "status"}),
		ResultsRejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "spookat_results_rejected_total", Help: "Results refused and not recorded: they do not match a message, conversation, site and target the edge published for.",
		}, []string{"reason"}),
		Inbound: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "spookat_inbound_total", Help: "Events the workers heard from outside (the INBOUND stream: Discord replies), by outcome: recorded, duplicate, unchanged, not_ours, refused.",
		}, []string{"outcome"}),
		SocketsPaced: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "spookat_sockets_paced_total", Help: "New widget sockets past -socket-rate: outcome waited (their turn came within 5 s) or refused (503 busy).",
		}, []string{"outcome"}),
		NATSRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "spookat_nats_refused_total", Help: "Clients the embedded NATS turned away, by reason: credentials (none, wrong, revoked, another authority's) or tls.",
		}, []string{"reason"}),
		LoginFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "spookat_login_failures_total", Help: "Wrong passwords at the inbox's login, by operator id (unknown: no such email).",
		}, []string{"operator_id"}),
		SocketRefusals: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "spookat_socket_refusals_total", Help: "Connections refused with 503 because -max-sockets connections were open.",
		}),
		AcceptErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "spookat_accept_errors_total", Help: "Failed accepts on the public listener (e.g. out of file descriptors), retried with a back-off.",
		}),
		RetentionPasses: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "spookat_retention_passes_total", Help: "Passes of the retention tick over every conversation (-retention of sites; every 10 minutes).",
		}),
		RetentionPurged: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "spookat_retention_purged_total", Help: "What sites' retention deleted: conversations, messages, files.",
		}, []string{"what"}),
		StreamBytes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "spookat_stream_bytes", Help: "Bytes a JetStream stream holds (read every few seconds).",
		}, []string{"stream"}),
		StreamMaxBytes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "spookat_stream_max_bytes", Help: "A stream's byte budget (-jobs-max-bytes, -results-max-bytes, -dead-max-bytes, -inbound-max-bytes): JOBS and INBOUND then refuse new messages, RESULTS and DEAD drop their oldest.",
		}, []string{"stream"}),
		StreamMessages: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "spookat_stream_messages", Help: "Messages a JetStream stream holds (read every few seconds).",
		}, []string{"stream"}),
	}
	reg.MustRegister(m.LoginFailures, m.NATSRefused, m.SocketRefusals, m.SocketsPaced, m.AcceptErrors, m.MessagesSaved, m.AckLatency, m.CommitBatch, m.CommitDuration, m.OpenSockets, m.FrameErrors, m.FilesStored, m.ResultsRecords, m.ResultsRejected, m.Inbound,
		m.StreamBytes, m.StreamMaxBytes, m.StreamMessages, m.RetentionPasses, m.RetentionPurged,
		collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(collectors.MetricsScheduler, collectors.MetricsGC)),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// BrakeLevels exports the flood brake level of every braked site (sites at level 0 are
// left out, so thousands of quiet sites cost no series) and the number of braked sites.
func (m *Set) BrakeLevels(each func(emit func(siteID int64, level int))) {
	m.Registry.MustRegister(&brakeCollector{each: each})
}

var (
	brakeLevelDesc = prometheus.NewDesc("spookat_site_brake_level",
		"Flood brake level of a braked site (0, not exported: not braked).", []string{"site"}, nil)
	brakedSitesDesc = prometheus.NewDesc("spookat_sites_braked", "Sites whose flood brake is engaged.", nil, nil)
)

type brakeCollector struct {
	each func(emit func(siteID int64, level int))
}

func (c *brakeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- brakeLevelDesc
	ch <- brakedSitesDesc
}

func (c *brakeCollector) Collect(ch chan<- prometheus.Metric) {
	n := 0
	c.each(func(id int64, level int) {
		n++
		ch <- prometheus.MustNewConstMetric(brakeLevelDesc, prometheus.GaugeValue, float64(level), strconv.FormatInt(id, 10))
	})
	ch <- prometheus.MustNewConstMetric(brakedSitesDesc, prometheus.GaugeValue, float64(n))
}

// Gauge registers a gauge whose value is read at scrape time.
func (m *Set) Gauge(name, help string, fn func() float64) {
	m.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, fn))
}

// SetStream records what a stream holds against its byte budget.
func (m *Set) SetStream(stream string, bytes, maxBytes, msgs uint64) {
	m.StreamBytes.WithLabelValues(stream).Set(float64(bytes))
	m.StreamMaxBytes.WithLabelValues(stream).Set(float64(maxBytes))
	m.StreamMessages.WithLabelValues(stream).Set(float64(msgs))
}

// Publisher exports the job publisher's refusals by a full JOBS: refused counts the publishes
// JetStream refused, full is whether jobs are held for want of room now.
func (m *Set) Publisher(refused func() int64, full func() bool) {
	m.Registry.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "spookat_publish_refused_total", ConstLabels: prometheus.Labels{"reason": "stream_full"},
			Help: "Job publishes JetStream refused; reason stream_full: JOBS is at -jobs-max-bytes (the jobs are kept and retried).",
		}, func() float64 { return float64(refused()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "spookat_jobs_full", Help: "1 while JOBS is at its byte budget and the edge holds new jobs until workers make room.",
		}, func() float64 {
			if full() {
				return 1
			}
			return 0
		}))
}

// SearchIndex exports the search indexer's passes (store.SearchIndexStats): a lag that keeps
// growing, or failed passes, mean searches miss the newest messages; a rebuild, that search.db
// was found damaged (a disk to look at).
func (m *Set) SearchIndex(stats func() (passes, failed, rebuilds int64, busy time.Duration, behind int64)) {
	m.Registry.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "spookat_search_index_passes_total", Help: "Passes of the search indexer (search.db: new messages in, deleted ones out).",
		}, func() float64 { p, _, _, _, _ := stats(); return float64(p) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "spookat_search_index_failed_passes_total", Help: "Passes of the search indexer that failed (the log says why; it tries again on the next tick).",
		}, func() float64 { _, f, _, _, _ := stats(); return float64(f) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "spookat_search_index_rebuilds_total", Help: "Times a pass found search.db damaged and the indexer replaced it with an empty one, filled again from the messages.",
		}, func() float64 { _, _, r, _, _ := stats(); return float64(r) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "spookat_search_index_seconds_total", Help: "Time the search indexer's passes took (its own goroutine and file: commits go on meanwhile).",
		}, func() float64 { _, _, _, b, _ := stats(); return b.Seconds() }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "spookat_search_index_behind", Help: "Message ids between the newest message and what the search index has read (about a second's worth normally; it counts unused ids after a restart).",
		}, func() float64 { _, _, _, _, b := stats(); return float64(b) }))
}

// WAL exports the SQLite WAL's size and the writer's own checkpoints (see store.WALStats):
// a WAL that keeps growing, or checkpoints that stay partial, is what an SRE looks at first
// when the disk fills or commits slow down.
// timer is the background checkpoint's passes and their time: passes that grow long (the
// disk is slow, or the box is loaded) are what lets the WAL pass -wal-max-pages.
func (m *Set) WAL(bytes func() int64, writer func() (whole, partial int64, stalled time.Duration), timer func() (passes int64, busy time.Duration)) {
	const help = "Checkpoints the writer ran itself between commits; whole: every frame copied, so the next commit restarted the WAL; partial: a reader's snapshot (a backup, Litestream) or the timer's checkpoint was in the way."
	m.Registry.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "spookat_wal_bytes", Help: "Size of the SQLite WAL file; the writer starts it again from its beginning once it passes -wal-max-pages (see ops/RUNBOOK.md \"The WAL\").",
		}, func() float64 { return float64(bytes()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "spookat_wal_writer_checkpoints_total", ConstLabels: prometheus.Labels{"outcome": "whole"}, Help: help,
		}, func() float64 { whole, _, _ := writer(); return float64(whole) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "spookat_wal_writer_checkpoints_total", ConstLabels: prometheus.Labels{"outcome": "partial"}, Help: help,
		}, func() float64 { _, partial, _ := writer(); return float64(partial) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "spookat_wal_writer_checkpoint_seconds_total", Help: "Time the writer spent in its own checkpoints (commits wait meanwhile).",
		}, func() float64 { _, _, stalled := writer(); return stalled.Seconds() }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "spookat_wal_timer_checkpoints_total", Help: "Passes of the background checkpoint (its own connection, every second and each quarter of -wal-max-pages; commits go on meanwhile).",
		}, func() float64 { passes, _ := timer(); return float64(passes) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "spookat_wal_timer_checkpoint_seconds_total", Help: "Time the background checkpoint's passes took; the WAL grows past -wal-max-pages by what arrives during one.",
		}, func() float64 { _, busy := timer(); return busy.Seconds() }))
}
