package server

import (
	"context"
	"log/slog"
	"time"
)

// stage is one named part of a running edge. At stop every stage's signal runs first, at once
// (a stage that needs long to finish, like the in-process worker with posts in flight, starts
// finishing while the others stop), then each stop runs in reverse order of start, all under
// one deadline.
type stage struct {
	name   string
	signal func()
	stop   func(ctx context.Context) error
}

// stages are the started stages, in order of start.
type stages struct {
	list   []stage
	log    *slog.Logger
	served bool // the edge got as far as serving: its stop is news, a failed start's is not
}

// add records a started stage; stop may be nil when signal is all it needs.
func (s *stages) add(name string, signal func(), stop func(ctx context.Context) error) {
	s.list = append(s.list, stage{name: name, signal: signal, stop: stop})
}

// stopAll stops every stage under one deadline. A stage that returns after the deadline is
// logged; the stages after it still run, so that what must happen (closing the store, which
// persists the watermark) always does, and quickly.
func (s *stages) stopAll(timeout time.Duration) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for _, st := range s.list {
		if st.signal != nil {
			st.signal()
		}
	}
	for i := len(s.list) - 1; i >= 0; i-- {
		st := s.list[i]
		if st.stop == nil {
			continue
		}
		t := time.Now()
		err := st.stop(ctx)
		took := time.Since(t).Round(time.Millisecond)
		switch {
		case err != nil:
			s.log.Warn("stop: "+st.name, "err", err, "took", took)
		case ctx.Err() != nil:
			s.log.Warn("stop: "+st.name+" ran out of time", "took", took)
		default:
			s.log.Debug("stopped "+st.name, "took", took)
		}
	}
	s.list = nil
	if s.served {
		s.log.Info("edge stopped", "took", time.Since(start).Round(time.Millisecond))
	}
}

// within is the part of d left before ctx's deadline.
func within(ctx context.Context, d time.Duration) time.Duration {
	if dl, ok := ctx.Deadline(); ok {
		d = min(d, time.Until(dl))
	}
	return max(d, 0)
}
