package browsertest

import (
	"context"
	"testing"
	"time"

	"spookat/edge/internal/admin"
	"spookat/edge/internal/server"
	"spookat/edge/internal/store"
)

// The inbox follows what the box's owner changes from the command line, without a reload: a
// site taken away disappears from the site list, a new password sends the tab to the login
// form instead of reconnecting forever.
func TestInboxFollowsMembershipAndPassword(t *testing.T) {
	e := startEdge(t, server.Config{})
	one := e.site(&store.Site{Name: "One"})
	two := e.site(&store.Site{Name: "Two"})
	e.operator("olivia@live.test", "Olivia", "correct horse battery", one.Key, two.Key)
	op := newTab(t, "operator")
	op.login(e.base, "olivia@live.test", "correct horse battery")
	if n := eval[int](op, `document.querySelectorAll('#site option').length`); n != 2 {
		t.Fatalf("site list has %d sites, want 2", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	api := admin.NewClient(e.edge.DataDir)

	if _, err := api.RemoveMember(ctx, admin.MemberRequest{SiteKey: one.Key, Email: "olivia@live.test"}); err != nil {
		t.Fatal(err)
	}
	op.waitJS("the site list without One", `document.querySelectorAll('#site option').length === 1 &&
		document.querySelector('#site option').textContent === 'Two' && document.querySelector('#live[data-state=live]')`)
	op.noReload()

	if _, err := api.SetPassword(ctx, admin.PasswordRequest{Email: "olivia@live.test", Password: "a brand new one"}); err != nil {
		t.Fatal(err)
	}
	op.waitJS("the login form saying why", `document.querySelector('#login') &&
		document.querySelector('#login .error').textContent.includes('session has ended')`)
	op.noReload()
}
