package inbox_test

import (
	"strconv"
	"testing"

	"spookat/edge/internal/edgetest"
	"spookat/edge/internal/store"
	"spookat/edge/internal/widget"
	"spookat/schema/testkit"
)

// Identify: a verified user is one conversation on every device (a second socket with its
// own token that identifies as the same user gets the first one's conversation and history);
// a user_hash that does not match is refused and changes nothing; a claim without user_hash
// is kept and shown to operators as unverified.
func TestIdentifyVerifiedUserIsOneConversation(t *testing.T) {
	v := start(t)
	const secret = "identity-secret-of-site-one"
	in := edgetest.Login(t, v.e.Addr, email, password)
	if st := in.Do(t, "PUT", "/sites/"+v.sites[0].Key+"/settings", map[string]string{"identity_secret": secret}, nil); st != 200 {
		t.Fatalf("set the identity secret: %d", st)
	}
	identify := func(c *edgetest.Client, user, hash string) edgetest.Frame {
		t.Helper()
		c.Send(t, map[string]string{"type": "identify", "user_id": user, "email": user + "@shop.test", "name": "Pat " + user, "user_hash": hash})
		for {
			f := c.Read(t)
			if f.Type == "identified" || f.Type == "error" {
				return f
			}
		}
	}

	laptop := edgetest.Dial(t, v.e.Addr, v.sites[0].Key, "")
	if f := identify(laptop, "u-42", widget.UserHash(secret, "u-42")); f.Type != "identified" || f.ConversationID != nil {
		t.Fatalf("first identify: %+v", f)
	}
	ack, err := laptop.SendAck("l-1", "from the laptop")
	testkit.NoErr(t, err)

	phone := edgetest.Dial(t, v.e.Addr, v.sites[0].Key, "")
	f := identify(phone, "u-42", widget.UserHash(secret, "u-42"))
	if f.Type != "identified" || f.ConversationID == nil || *f.ConversationID != *ack.ConversationID || f.LastMessageID != ack.MessageID {
		t.Fatalf("the phone's identify: %+v, want conversation %d", f, *ack.ConversationID)
	}
	phone.Send(t, map[string]any{"type": "resume", "after_message_id": 0})
	if m := wantFrame(t, phone, "message"); m.Text != "from the laptop" {
		t.Fatalf("the phone's history: %+v", m)
	}
	if _, err := phone.SendAck("p-1", "from the phone"); err != nil {
		t.Fatal(err)
	}
	if m := wantFrame(t, laptop, "message"); m.Text != "from the phone" {
		t.Fatalf("the laptop did not get the phone's message live: %+v", m)
	}

	// Another user on the laptop's browser (its token's visitor is u-42's now): their email
	// goes on their own visitor, never on u-42's.
	shared := edgetest.Dial(t, v.e.Addr, v.sites[0].Key, laptop.Hello.Visitor)
	if f := identify(shared, "u-50", widget.UserHash(secret, "u-50")); f.Type != "identified" || f.ConversationID != nil {
		t.Fatalf("a second user on the same browser: %+v, want a visitor of their own", f)
	}
	ack50, err := shared.SendAck("s-1", "I am u-50")
	if err != nil || *ack50.ConversationID == *ack.ConversationID {
		t.Fatalf("u-50's message: %+v %v", ack50, err)
	}
	shared.Send(t, map[string]string{"type": "email", "email": "carol@shop.test"})
	if f := wantFrame(t, shared, "email_saved"); f.Type != "email_saved" {
		t.Fatalf("email: %+v", f)
	}

	forger := edgetest.Dial(t, v.e.Addr, v.sites[0].Key, "")
	if f := identify(forger, "u-42", widget.UserHash("guessed-secret", "u-42")); f.Type != "error" || f.Code != "unverified" || f.Message == "" {
		t.Fatalf("a forged user_hash: %+v, want error unverified", f)
	}
	if ack2, err := forger.SendAck("f-1", "am I u-42?"); err != nil || *ack2.ConversationID == *ack.ConversationID {
		t.Fatalf("the forger's message went to the user's conversation: %+v %v", ack2, err)
	}

	claimer := edgetest.Dial(t, v.e.Addr, v.sites[0].Key, "")
	if f := identify(claimer, "u-7", ""); f.Type != "identified" || f.Verified {
		t.Fatalf("a claim: %+v", f)
	}
	ack3, err := claimer.SendAck("c-1", "claimed")
	testkit.NoErr(t, err)
	var got struct {
		Conversation store.ConversationSummary `json:"conversation"`
	}
	in.Do(t, "GET", "/conversations/"+strconv.FormatInt(*ack3.ConversationID, 10), nil, &got)
	if c := got.Conversation; c.UserID != "u-7" || c.Verified || c.VisitorName != "Pat u-7" {
		t.Fatalf("the claimed conversation: %+v, want user u-7 unverified", c)
	}
	in.Do(t, "GET", "/conversations/"+strconv.FormatInt(*ack.ConversationID, 10), nil, &got)
	if c := got.Conversation; c.UserID != "u-42" || !c.Verified || c.VisitorEmail != "u-42@shop.test" {
		t.Fatalf("the verified conversation: %+v", c)
	}
	in.Do(t, "GET", "/conversations/"+strconv.FormatInt(*ack50.ConversationID, 10), nil, &got)
	if c := got.Conversation; c.UserID != "u-50" || c.VisitorEmail != "carol@shop.test" {
		t.Fatalf("u-50's conversation: %+v, want the email left on it", c)
	}

	// Issue 29, point 6: a visitor who claims u-42's id and email without the signature
	// borrows nothing of u-42's history; another unverified visitor with that email is listed,
	// marked as a claim.
	impostor := edgetest.Dial(t, v.e.Addr, v.sites[0].Key, "")
	if f := identify(impostor, "u-42", ""); f.Type != "identified" || f.Verified {
		t.Fatalf("the impostor's claim: %+v", f)
	}
	ackI, err := impostor.SendAck("i-1", "it's me, u-42, what did I order?")
	testkit.NoErr(t, err)
	var ctx struct {
		Conversation store.ConversationSummary `json:"conversation"`
		Context      store.ConversationContext `json:"context"`
	}
	in.Do(t, "GET", "/conversations/"+strconv.FormatInt(*ackI.ConversationID, 10), nil, &ctx)
	for _, e := range ctx.Context.Earlier {
		if e.ID == *ack.ConversationID {
			t.Fatalf("an unverified claim of u-42 lists u-42's verified conversation: %+v", ctx.Context.Earlier)
		}
	}
	if c := ctx.Conversation; c.Verified || c.UserID != "u-42" {
		t.Fatalf("the impostor's conversation: %+v, want it unverified", c)
	}
	second := edgetest.Dial(t, v.e.Addr, v.sites[0].Key, "")
	identify(second, "u-42", "")
	ack4, err := second.SendAck("s2-1", "me again")
	testkit.NoErr(t, err)
	in.Do(t, "GET", "/conversations/"+strconv.FormatInt(*ack4.ConversationID, 10), nil, &ctx)
	if e := ctx.Context.Earlier; len(e) != 1 || e[0].ID != *ackI.ConversationID || e[0].Verified {
		t.Fatalf("another unverified visitor with the email: earlier %+v, want the impostor's, marked unverified", e)
	}
}
