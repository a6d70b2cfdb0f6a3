package edgetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// StoredMsgs calls fn with every message a stream holds now, in sequence order (messages
// deleted meanwhile, as a work queue deletes what is acked, are skipped).
func StoredMsgs(t testing.TB, js jetstream.JetStream, stream string, fn func(*jetstream.RawStreamMsg)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			t.Fatalf("%s seq %d: %v", stream, seq, err)
		}
		fn(m)
	}
}
