// Package metrics holds the worker's Prometheus collectors. Label children for the hot path are
// resolved once, so counting a delivery is an atomic add.
package metrics

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// M is the worker's metrics.
type M struct {
	Jobs        *prometheus.CounterVec   // lane, target, status (delivered|dead)
	Retries     *prometheus.CounterVec   // lane, target
	RateLimited *prometheus.CounterVec   // target
	Merged      *prometheus.CounterVec   // target: messages that went out inside another's post
	Latency     *prometheus.HistogramVec // lane, target: one attempt, seconds
	Age         *prometheus.HistogramVec // lane, target: created → delivered, seconds
	InFlight    *prometheus.GaugeVec     // lane
	Queued      *prometheus.GaugeVec     // lane: jobs received and not yet done
	Partitions  *prometheus.GaugeVec     // lane: partitions this worker owns
	Full        *prometheus.GaugeVec     // lane: owned partitions not taking jobs: their hold is at its bound
}

// New registers the collectors on r. Collectors already registered there (a second worker
// in the same process, as tests do) are shared rather than failing.
func New(r prometheus.Registerer) *M {
	m := &M{
		Jobs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "spookat_worker_jobs_total",
			Help: "Jobs finished, by lane, target and status (delivered or dead)."}, []string{"lane", "target", "status"}),
		Retries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "spookat_worker_retries_total",
			Help: "Failed attempts that will be retried."}, []string{"lane", "target"}),
		RateLimited: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "spookat_worker_rate_limited_total",
			Help: "429 answers received (Slack, Discord, webhooks)."}, []string{"target"}),
		Merged: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "spookat_worker_merged_total",
			Help: "Messages posted merged into an earlier message's post because the channel was rate limited."}, []string{"target"}),
		Latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "spookat_worker_attempt_seconds",
			Help:    "Duration of one delivery attempt.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}}, []string{"lane", "target"}),
		Age: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "spookat_worker_delivery_age_seconds",
			Help:    "From the message's creation to its delivery.",
			Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 3600}}, []string{"lane", "target"}),
		InFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "spookat_worker_in_flight",
			Help: "Deliveries in progress."}, []string{"lane"}),
		Queued: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "spookat_worker_queued",
			Help: "Jobs received from JetStream and not yet finished (in flight, waiting their turn or a retry)."}, []string{"lane"}),
		Partitions: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "spookat_worker_partitions_owned",
			Help: "Lane partitions this worker owns."}, []string{"lane"}),
		Full: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "spookat_worker_partitions_full",
			Help: "Owned partitions that take no more jobs until some of those they hold are done (a target down or slow)."}, []string{"lane"}),
	}
	if r == nil {
		return m
	}
	m.Jobs = register(r, m.Jobs)
	m.Retries = register(r, m.Retries)
	m.RateLimited = register(r, m.RateLimited)
	m.Merged = register(r, m.Merged)
	m.Latency = register(r, m.Latency)
	m.Age = register(r, m.Age)
	m.InFlight = register(r, m.InFlight)
	m.Queued = register(r, m.Queued)
	m.Partitions = register(r, m.Partitions)
	m.Full = register(r, m.Full)
	return m
}

func register[C prometheus.Collector](r prometheus.Registerer, c C) C {
	if err := r.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
		panic(err)
	}
	return c
}

// Target is the pre-resolved set of children for one lane and target.
type Target struct {
	Delivered, Dead, Retries, RateLimited, Merged prometheus.Counter
	Latency, Age                                  prometheus.Observer
}

// For resolves the children of a lane and target.
func (m *M) For(lane, target string) *Target {
	return &Target{
		Delivered:   m.Jobs.WithLabelValues(lane, target, "delivered"),
		Dead:        m.Jobs.WithLabelValues(lane, target, "dead"),
		Retries:     m.Retries.WithLabelValues(lane, target),
		RateLimited: m.RateLimited.WithLabelValues(target),
		Merged:      m.Merged.WithLabelValues(target),
		Latency:     m.Latency.WithLabelValues(lane, target),
		Age:         m.Age.WithLabelValues(lane, target),
	}
}
