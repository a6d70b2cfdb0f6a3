package broker_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"spookat/edge/internal/broker"
)

// Settle waits out JetStream's "not yet" while a cluster forms, the 10039 a node answers
// before its account's JetStream is up among them (an edge started with its cluster exited on
// it), and returns any other error at once.
func TestSettleWaitsOutNotYet(t *testing.T) {
	for _, tc := range []struct {
		name    string
		err     error
		retried bool
	}{
		{"not enabled for account", &jetstream.APIError{Code: 503, ErrorCode: jetstream.JSErrCodeJetStreamNotEnabledForAccount, Description: "JetStream not enabled for account"}, true},
		{"not enabled", &jetstream.APIError{Code: 503, ErrorCode: jetstream.JSErrCodeJetStreamNotEnabled, Description: "JetStream not enabled"}, true},
		{"no responders", nats.ErrNoResponders, true},
		{"insufficient resources", &jetstream.APIError{Code: 503, ErrorCode: 10023, Description: "insufficient resources"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			err := broker.Settle(context.Background(), slog.New(slog.DiscardHandler), "create streams", func(context.Context) error {
				calls++
				if calls == 1 {
					return fmt.Errorf("stream JOBS: %w", tc.err)
				}
				return nil
			})
			switch {
			case tc.retried && (err != nil || calls != 2):
				t.Fatalf("%d calls, %v; want a second call that succeeds", calls, err)
			case !tc.retried && (calls != 1 || !errors.Is(err, tc.err)):
				t.Fatalf("%d calls, %v; want the error at once", calls, err)
			}
		})
	}
}
