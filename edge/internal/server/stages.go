package server

import (
	"context"
	"log/slog"
	"time"
)

// stage is one named part of a running edge (see Edge.stages). start opens it (nil: nothing
// to open, it only stops); signal, if set, runs at the beginning of every stop, before any
// stop; stop closes it and must cope with a start that failed halfway.
type stage struct {
	name   string
	start  func(ctx context.Context) error
	signal func()
	stop   func(ctx context.Context) error
}

// stopAll signals every stage at once, then stops each in reverse order of start, all under
// ctx's deadline; a stop past it still runs and is logged.
func stopAll(ctx context.Context, started []stage, log *slog.Logger) {
	for _, st := range started {
		if st.signal != nil {
			st.signal()
		}
	}
	for i := len(started) - 1; i >= 0; i-- {
		st := started[i]
		if st.stop == nil {
			continue
		}
		t := time.Now()
		err := st.stop(ctx)
		took := time.Since(t).Round(time.Millisecond)
		switch {
		case err != nil:
			log.Warn("stop: "+st.name, "err", err, "took", took)
		case ctx.Err() != nil:
			log.Warn("stop: "+st.name+" ran out of time", "took", took)
		default:
			log.Debug("stopped "+st.name, "took", took)
		}
	}
}

// within is the part of d left before ctx's deadline.
func within(ctx context.Context, d time.Duration) time.Duration {
	if dl, ok := ctx.Deadline(); ok {
		d = min(d, time.Until(dl))
	}
	return max(d, 0)
}
