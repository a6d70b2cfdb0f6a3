package inbox_test

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"spookat/edge/internal/edgetest"
	"spookat/schema/testkit"
)

// wantEvent reads the operator socket until an event of type typ for which match holds.
func wantEvent(t *testing.T, s *edgetest.OpSocket, typ string, match func(map[string]any) bool) map[string]any {
	t.Helper()
	for {
		f, err := s.Next(10 * time.Second)
		if err != nil {
			t.Fatalf("waiting for a %s event: %v", typ, err)
		}
		if f["type"] == typ && match(f) {
			return f
		}
	}
}

// wantFrame reads the widget socket until a frame of type typ.
func wantFrame(t *testing.T, c *edgetest.Client, typ string) edgetest.Frame {
	t.Helper()
	for {
		f := c.Read(t)
		if f.Type == typ {
			return f
		}
	}
}

// Typing and read markers both ways: the visitor's typing and "seen" reach the site's
// operators live; an operator's typing and read marker reach the visitor's socket; the
// markers are stored (a new socket's hello carries them) while typing is not.
func TestTypingAndSeenBothWays(t *testing.T) {
	v := start(t)
	in := edgetest.Login(t, v.e.Addr, email, password)
	ops := in.DialInbox(t)

	visitor := edgetest.Dial(t, v.e.Addr, v.sites[0].Key, "")
	ack, err := visitor.SendAck("v-1", "hello?")
	testkit.NoErr(t, err)
	conv := *ack.ConversationID
	convPath := "/conversations/" + strconv.FormatInt(conv, 10)
	isConv := func(f map[string]any) bool { return f["conversation_id"] == float64(conv) }

	t.Run("visitor typing reaches operators", func(t *testing.T) {
		visitor.Send(t, map[string]string{"type": "typing"})
		f := wantEvent(t, ops, "typing", isConv)
		if f["by"] != "visitor" || f["site_id"] != float64(v.sites[0].ID) {
			t.Fatalf("typing event %v", f)
		}
	})

	t.Run("operator typing reaches the visitor", func(t *testing.T) {
		if st := in.Do(t, "POST", convPath+"/typing", nil, nil); st != http.StatusNoContent {
			t.Fatalf("typing: %d", st)
		}
		if f := wantFrame(t, visitor, "typing"); f.Name != "ann" { // the operator's name, never their email
			t.Fatalf("typing frame %+v, want the operator's name", f)
		}
	})

	var reply struct {
		Message struct {
			ID int64 `json:"id"`
		} `json:"message"`
	}
	if st := in.Do(t, "POST", convPath+"/messages", map[string]string{"text": "How can I help?"}, &reply); st != http.StatusCreated {
		t.Fatalf("reply: %d", st)
	}

	t.Run("operator read marker reaches the visitor", func(t *testing.T) {
		if st := in.Do(t, "POST", convPath+"/read", map[string]int64{"message_id": ack.MessageID}, nil); st != http.StatusNoContent {
			t.Fatalf("read: %d", st)
		}
		if f := wantFrame(t, visitor, "seen"); f.MessageID < ack.MessageID {
			t.Fatalf("seen frame %+v, want at least %d", f, ack.MessageID)
		}
	})

	t.Run("visitor read marker is stored and reaches operators", func(t *testing.T) {
		visitor.Send(t, map[string]any{"type": "seen", "message_id": reply.Message.ID + 100}) // past the end: clamped
		f := wantEvent(t, ops, "seen", isConv)
		if f["by"] != "visitor" || f["message_id"] != float64(reply.Message.ID) {
			t.Fatalf("seen event %v, want message_id %d", f, reply.Message.ID)
		}
		var got struct {
			Conversation struct {
				VisitorReadID int64 `json:"visitor_read_id"`
			} `json:"conversation"`
		}
		in.Do(t, "GET", convPath, nil, &got)
		if got.Conversation.VisitorReadID != reply.Message.ID {
			t.Fatalf("visitor_read_id %d, want %d", got.Conversation.VisitorReadID, reply.Message.ID)
		}
	})

	t.Run("a bad seen frame gets an answer", func(t *testing.T) {
		visitor.Send(t, map[string]any{"type": "seen", "message_id": -3})
		if f := wantFrame(t, visitor, "error"); f.Code != "invalid" || f.Message == "" {
			t.Fatalf("error frame %+v", f)
		}
	})

	t.Run("a new socket's hello carries both markers", func(t *testing.T) {
		again := edgetest.Dial(t, v.e.Addr, v.sites[0].Key, visitor.Hello.Visitor)
		if again.Hello.ReadMessageID != reply.Message.ID || again.Hello.SeenMessageID < ack.MessageID {
			t.Fatalf("hello %+v, want read %d and seen ≥ %d", again.Hello, reply.Message.ID, ack.MessageID)
		}
	})
}
