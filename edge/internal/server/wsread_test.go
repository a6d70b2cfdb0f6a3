package server_test

import (
	"encoding/binary"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	fws "github.com/fasthttp/websocket"

	"spookat/edge/internal/edgetest"
	"spookat/edge/internal/server"
	"spookat/edge/internal/store"
	"spookat/schema"
	"spookat/schema/testkit"
)

// rawFrame is a client frame as a browser puts it on the wire (RFC 6455 §5.2: masked).
func rawFrame(fin bool, op byte, payload []byte) []byte {
	b := []byte{op}
	if fin {
		b[0] |= 0x80
	}
	switch n := len(payload); {
	case n < 126:
		b = append(b, 0x80|byte(n))
	case n <= 0xFFFF:
		b = append(b, 0x80|126)
		b = binary.BigEndian.AppendUint16(b, uint16(n))
	default:
		b = append(b, 0x80|127)
		b = binary.BigEndian.AppendUint64(b, uint64(n))
	}
	mask := [4]byte{0x37, 0xfa, 0x21, 0x3d}
	b = append(b, mask[:]...)
	for i, c := range payload {
		b = append(b, c^mask[i&3])
	}
	return b
}

// The edge reads widget frames itself on a poller shared by every socket (Linux), or with a
// goroutine a socket (the library's reader, elsewhere): a client sees no difference, whatever
// way its bytes arrive. Each case runs on both readers.
func TestFramesHoweverTheyArrive(t *testing.T) {
	for _, each := range []bool{false, true} {
		name := map[bool]string{false: "poller", true: "a goroutine a socket"}[each]
		t.Run(name, func(t *testing.T) {
			e := edgetest.Start(t, "", server.Config{WidgetReadEach: each, FirstFrame: 2 * time.Second})
			site := edgetest.AddSite(t, e.DataDir, &store.Site{Name: "frames", Origins: []string{"*"}})
			db := edgetest.OpenDB(t, e.DataDir)
			write := func(t *testing.T, v *edgetest.Client, chunks ...[]byte) {
				t.Helper()
				for _, c := range chunks {
					_, err := v.WS.NetConn().Write(c)
					testkit.NoErr(t, err)
				}
			}
			msg := func(id, text string) []byte {
				return []byte(`{"type":"message","client_id":"` + id + `","text":"` + text + `"}`)
			}
			stored := func(t *testing.T, f edgetest.Frame) string {
				t.Helper()
				return edgetest.QueryText(t, db, "SELECT text FROM messages WHERE id = "+strconv.FormatInt(f.MessageID, 10))
			}
			ack := func(t *testing.T, v *edgetest.Client, id string) edgetest.Frame {
				t.Helper()
				f := v.Read(t)
				if f.Type != "ack" || f.ClientID != id {
					t.Fatalf("got %+v, want the ack of %s", f, id)
				}
				return f
			}

			t.Run("a frame in pieces, and two in one write", func(t *testing.T) {
				v := edgetest.Dial(t, e.Addr, site.Key, "")
				f := rawFrame(true, 1, msg("p2", "in pieces"))
				// The first write ends inside the second frame: its ack proves the server read
				// that far, so the rest of p2 comes in a read of its own.
				write(t, v, append(rawFrame(true, 1, msg("p1", "first")), f[:7]...))
				ack(t, v, "p1")
				write(t, v, f[7:20])
				write(t, v, f[20:])
				if a := ack(t, v, "p2"); stored(t, a) != "in pieces" {
					t.Fatalf("stored %q", stored(t, a))
				}
				write(t, v, append(rawFrame(true, 1, msg("p3", "two")), rawFrame(true, 1, msg("p4", "in one"))...))
				ack(t, v, "p3")
				if a := ack(t, v, "p4"); stored(t, a) != "in one" {
					t.Fatalf("stored %q", stored(t, a))
				}
			})
			t.Run("a message in fragments, a ping between them", func(t *testing.T) {
				v := edgetest.Dial(t, e.Addr, site.Key, "")
				pong := make(chan string, 1)
				v.WS.SetPongHandler(func(data string) error { pong <- data; return nil })
				whole := msg("f1", strings.Repeat("long ", 40)+"end")
				// The pong proves the first fragment was read before the rest is sent.
				write(t, v, rawFrame(false, 1, whole[:30]), rawFrame(true, 9, []byte("between")))
				go func() { _, _ = v.ReadErr(10 * time.Second) }() // reads control frames until the ack
				select {
				case got := <-pong:
					if got != "between" {
						t.Fatalf("pong %q", got)
					}
				case <-time.After(10 * time.Second):
					t.Fatal("no pong")
				}
				write(t, v, rawFrame(false, 0, whole[30:100]), rawFrame(true, 0, whole[100:]))
				testkit.WaitFor(t, "the message stored", 10*time.Second, func() bool {
					return edgetest.QueryInt(t, db, `SELECT count(*) FROM messages WHERE client_id = 'f1'`) == 1
				})
				if got := edgetest.QueryText(t, db, `SELECT text FROM messages WHERE client_id = 'f1'`); got != strings.Repeat("long ", 40)+"end" {
					t.Fatalf("stored %q", got)
				}
			})
			t.Run("a frame that waits, then one that does not, in one write: in order", func(t *testing.T) {
				// A page frame may write to the store (answered off the poller); the message
				// behind it must still see the page, as the visitor's first message takes it.
				v := edgetest.Dial(t, e.Addr, site.Key, "")
				page := []byte(`{"type":"page","url":"http://site.test/pricing","title":"Pricing"}`)
				write(t, v, append(rawFrame(true, 1, page), rawFrame(true, 1, msg("o1", "after the page"))...))
				a := ack(t, v, "o1")
				got := edgetest.QueryText(t, db, "SELECT json_extract(context, '$.url') FROM conversation_contexts WHERE conversation_id = "+strconv.FormatInt(*a.ConversationID, 10))
				if got != "http://site.test/pricing" {
					t.Fatalf("the conversation's page is %q", got)
				}
			})
			t.Run("a ping inside a message near the limit", func(t *testing.T) {
				// 16,345 bytes in two fragments, a 100-byte ping between them: the limit is
				// the message's, not the ping's (the text is too long, which is an answer).
				v := edgetest.Dial(t, e.Addr, site.Key, "")
				whole := msg("n1", strings.Repeat("x", 16300))
				write(t, v, rawFrame(false, 1, whole[:16300]), rawFrame(true, 9, make([]byte, 100)), rawFrame(true, 0, whole[16300:]))
				if f := v.Read(t); f.Type != "error" || f.Code != schema.CodeTooLarge {
					t.Fatalf("after the message: %+v", f)
				}
			})
			t.Run("a binary frame is answered, the socket stays", func(t *testing.T) {
				v := edgetest.Dial(t, e.Addr, site.Key, "")
				write(t, v, rawFrame(true, 2, []byte{1, 2, 3}))
				if f := v.Read(t); f.Type != "error" || f.Code != schema.CodeInvalid {
					t.Fatalf("after a binary frame: %+v", f)
				}
				write(t, v, rawFrame(true, 1, msg("b1", "still here")))
				ack(t, v, "b1")
			})
			t.Run("silent after the hello", func(t *testing.T) {
				v := edgetest.Dial(t, e.Addr, site.Key, "")
				if _, err := v.ReadErr(10 * time.Second); !fws.IsCloseError(err, fws.ClosePolicyViolation) {
					t.Fatalf("read: %v, want close 1008", err)
				}
			})
			if !each {
				t.Run("a frame sent before the handshake's answer", func(t *testing.T) {
					c, err := net.Dial("tcp", e.Addr)
					testkit.NoErr(t, err)
					defer c.Close()
					req := "GET /v1/widget/ws?site=" + site.Key + " HTTP/1.1\r\nHost: " + e.Addr +
						"\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13" +
						"\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nOrigin: http://site.test\r\n\r\n"
					_, err = c.Write(append([]byte(req), rawFrame(true, 1, msg("early", "too soon"))...))
					testkit.NoErr(t, err)
					testkit.NoErr(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
					got, _ := io.ReadAll(c) // the 101, the hello, then a close frame, then EOF
					i := strings.LastIndex(string(got), "\x88")
					if !strings.HasPrefix(string(got), "HTTP/1.1 101") || i < 0 || i+4 > len(got) ||
						binary.BigEndian.Uint16(got[i+2:]) != fws.CloseProtocolError {
						t.Fatalf("answer: %q", got)
					}
					if n := edgetest.QueryInt(t, db, `SELECT count(*) FROM messages WHERE client_id = 'early'`); n != 0 {
						t.Fatal("the early frame was stored")
					}
				})
			}
			t.Run("every way a socket ends, the edge lets go of it", func(t *testing.T) {
				for i := range 60 {
					v := edgetest.Dial(t, e.Addr, site.Key, "")
					id := "end-" + strconv.Itoa(i)
					switch i % 4 {
					case 0: // a close frame
						_, err := v.SendAck(id, "bye")
						testkit.NoErr(t, err)
						write(t, v, rawFrame(true, 8, []byte{0x03, 0xe8}))
					case 1: // the connection dropped
						_, err := v.SendAck(id, "bye")
						testkit.NoErr(t, err)
						v.WS.NetConn().Close()
					case 2: // a frame that may wait, then dropped at once
						write(t, v, rawFrame(true, 1, []byte(`{"type":"page","url":"http://site.test/x"}`)))
						v.WS.NetConn().Close()
					case 3: // a protocol error
						write(t, v, rawFrame(true, 3, nil))
					}
				}
				testkit.WaitFor(t, "every socket let go", 10*time.Second, func() bool {
					open, ok1 := edgetest.Metric(e.MetricsAddr, "spookat_open_sockets")
					conns, ok2 := edgetest.Metric(e.MetricsAddr, "spookat_connections_open")
					return ok1 && ok2 && open == 0 && conns == 0
				})
			})
			for _, c := range []struct {
				name  string
				bytes []byte
				code  int
			}{
				{"an unmasked frame", append([]byte{0x81, 2}, "{}"...), fws.CloseProtocolError},
				{"an unknown opcode", rawFrame(true, 3, []byte("x")), fws.CloseProtocolError},
				{"a continuation with nothing to continue", rawFrame(true, 0, msg("c", "x")), fws.CloseProtocolError},
				{"fragments past 16 KiB", append(rawFrame(false, 1, make([]byte, 10000)), rawFrame(true, 0, make([]byte, 10000))...), fws.CloseMessageTooBig},
				{"a close frame is answered with its code", rawFrame(true, 8, []byte{0x03, 0xe8}), fws.CloseNormalClosure},
			} {
				t.Run(c.name, func(t *testing.T) {
					v := edgetest.Dial(t, e.Addr, site.Key, "")
					write(t, v, c.bytes)
					_, err := v.ReadErr(10 * time.Second)
					if !fws.IsCloseError(err, c.code) {
						t.Fatalf("read after it: %v, want close %d", err, c.code)
					}
				})
			}
		})
	}
}
