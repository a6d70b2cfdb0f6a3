package server_test

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"spookat/edge/internal/admin"
	"spookat/edge/internal/edgetest"
	"spookat/edge/internal/server"
	"spookat/edge/internal/store"
	"spookat/schema/testkit"
)

// A window that is open hears the site's operators come and go: online as an inbox opens,
// away once the last one closes (nobody replied), online again from a reply made elsewhere
// (an API token, as Slack's replies are recorded).
func TestPresenceReachesOpenWindows(t *testing.T) {
	e := edgetest.Start(t, "", server.Config{})
	site := edgetest.AddSite(t, e.DataDir, &store.Site{Name: "here", Origins: []string{"*"}})
	other := edgetest.AddSite(t, e.DataDir, &store.Site{Name: "elsewhere", Origins: []string{"*"}})
	edgetest.AddOperator(t, e.DataDir, admin.OperatorRequest{Email: "ann@here.test", Password: "correct horse battery", SiteKeys: []string{site.Key}})
	v := edgetest.Dial(t, e.Addr, site.Key, "")
	bystander := edgetest.Dial(t, e.Addr, other.Key, "")
	v.Presence, bystander.Presence = true, true
	if v.Hello.Status != "away" {
		t.Fatalf("hello status %q with nobody around, want away", v.Hello.Status)
	}
	presence := func(c *edgetest.Client, want string) {
		t.Helper()
		for {
			f, err := c.ReadErr(10 * time.Second)
			if err != nil {
				t.Fatalf("no presence %s: %v", want, err)
			}
			if f.Type == "presence" {
				if f.Status != want {
					t.Fatalf("presence %q, want %q", f.Status, want)
				}
				return
			}
		}
	}
	ack, err := v.SendAck("c1", "hello?")
	testkit.NoErr(t, err)

	in := edgetest.Login(t, e.Addr, "ann@here.test", "correct horse battery")
	ops := in.DialInbox(t)
	presence(v, "online")
	ops.WS.Close()
	presence(v, "away")

	api := in.NewToken(t)
	if code := api.Do(t, "POST", "/conversations/"+strconv.FormatInt(*ack.ConversationID, 10)+"/messages", map[string]any{"text": "Here now"}, nil); code != http.StatusCreated {
		t.Fatalf("reply: %d", code)
	}
	presence(v, "online")
	// Another site's window heard none of it: its next frame is the ack of what it sends now
	// (frames reach a socket in order; site one's presence frames were sent before).
	if _, err := bystander.SendAck("b1", "anyone?"); err != nil {
		t.Fatalf("another site's window: %v", err)
	}
}
