package stairs

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"spookat/schema"
	"spookat/schema/testkit"
)

// A server whose sockets each hold 64 KiB shows at least that much a socket; one with no Go
// metrics has no heap figures rather than made-up ones.
func TestIdleMeasuresWhatSocketsHold(t *testing.T) {
	held := make(chan []byte, 200)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/widget/ws" {
			http.NotFound(w, r)
			return
		}
		up := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		b := make([]byte, 64<<10)
		for i := range b { // resident, not just reserved
			b[i] = 1
		}
		held <- b
		c.WriteJSON(schema.Hello{Type: schema.FrameHello, Visitor: "v"})
		for {
			if _, _, err := c.ReadMessage(); err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	rep, err := Idle(context.Background(), Config{EdgeURL: srv.URL, Keys: []string{"a"}, Sockets: 100, EdgePID: os.Getpid()}, 200*time.Millisecond)
	testkit.NoErr(t, err)
	t.Log(rep.Line())
	if rep.Sockets != 100 || rep.KiBPerSocket < 64 {
		t.Fatalf("%d sockets, %.1f KiB a socket: want 100 and at least 64", rep.Sockets, rep.KiBPerSocket)
	}
	if rep.HeapKiB != nil {
		t.Fatalf("heap figures from a server without Go metrics: %v", *rep.HeapKiB)
	}
}
