package browsertest

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"spookat/edge/internal/server"
	"spookat/edge/internal/store"
)

// Issue 13, point 2: sharing the work. Ann assigns a conversation to Bob, whose "Mine" list
// gets it live; she snoozes it, it reopens by itself when the time comes (the edge's tick,
// its clock moved forward here) and, snoozed again, when the visitor writes; each change is a
// line in the conversation; the site picker counts each site's unread conversations.
func TestShareTheWork(t *testing.T) {
	var skew atomic.Int64
	e := startEdge(t, server.Config{SnoozeTick: 100 * time.Millisecond,
		Clock: func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }})
	site := e.site(&store.Site{Name: "Team"})
	other := e.site(&store.Site{Name: "Zeta"}) // after Team in the picker: Team is the site shown first
	const pw = "correct horse battery"
	e.operator("ann@team.test", "Ann", pw, site.Key, other.Key)
	e.operator("bob@team.test", "Bob", pw, site.Key)

	v := newTab(t, "visitor")
	v.openDemo(e.base, site.Key)
	v.openChat()
	v.typeAndSend("A question about my invoice")
	v.waitSent("A question about my invoice")

	listed := `document.querySelector('#conversations li[data-id]')`
	empty := `document.querySelector('#conversations li.empty')`
	line := func(text string) string {
		return `Array.from(document.querySelectorAll('#messages .msg.event .text')).some(e => e.textContent.startsWith(` + js(text) + `))`
	}
	status := func(st string) string { return `document.querySelector('#conv-status').textContent === ` + js(st) }

	ann := newTab(t, "ann")
	ann.login(e.base, "ann@team.test", pw)
	ann.do("mine", chromedp.Click(chromedp.CSS(`[data-assignee=me]`)))
	ann.waitJS("nothing of Ann's yet", empty)
	ann.do("unassigned", chromedp.Click(chromedp.CSS(`[data-assignee=unassigned]`)))
	ann.waitJS("the new conversation is unassigned", listed)

	bob := newTab(t, "bob")
	bob.login(e.base, "bob@team.test", pw)
	bob.do("mine", chromedp.Click(chromedp.CSS(`[data-assignee=me]`)))
	bob.waitJS("nothing of Bob's yet", empty)

	ann.openFirstConversation()
	ann.waitJS("teammates to pick from", `Array.from(document.querySelectorAll('#conv-assignee option')).some(o => o.textContent === 'Bob')`)
	eval[any](ann, `(() => { const s = document.querySelector('#conv-assignee'); // what picking Bob does
		s.value = Array.from(s.options).find(o => o.textContent === 'Bob').value; s.dispatchEvent(new Event('change')); })()`)
	ann.waitJS("the assignment in the conversation", line("\u2192 Assigned to Bob by Ann"))
	ann.waitJS("gone from the unassigned list", empty)
	bob.waitJS("in Bob's list, live", listed+` && document.querySelector('#conversations li[data-id] .owner').textContent === 'Mine'`)
	bob.noReload()
	ann.shot("assigned")

	// Snoozed for an hour: the visitor sees nothing change; the Snoozed list has it.
	ann.do("snooze for an hour", chromedp.Click(chromedp.CSS(`#conv-snooze summary`)), chromedp.Click(chromedp.CSS(`[data-snooze="1h"]`)))
	ann.waitJS("snoozed", status("snoozed"))
	ann.waitJS("the snooze in the conversation", line("\u263e Snoozed by Ann until"))
	ann.do("the snoozed list", chromedp.Click(chromedp.CSS(`[data-filter=snoozed]`)), chromedp.Click(chromedp.CSS(`[data-assignee=all]`)))
	ann.waitJS("listed as snoozed, until when", listed+` && document.querySelector('#conversations li[data-id] .snz')`)
	ann.shot("snoozed")
	if eval[bool](v, W+`.querySelector('li.rate') !== null`) {
		t.Fatal("the visitor was asked for a rating: a snoozed conversation is open to them")
	}

	// Two hours later by the edge's clock, the tick reopens it.
	skew.Store(int64(2 * time.Hour))
	ann.waitJS("reopened by itself", status("open"))
	ann.waitJS("the snooze's end in the conversation", line("\u21a9 Snooze ended"))
	ann.waitJS("gone from the snoozed list", empty)
	skew.Store(0)

	// Snoozed again; the visitor writes: open at once.
	ann.do("snooze until tomorrow", chromedp.Click(chromedp.CSS(`#conv-snooze summary`)), chromedp.Click(chromedp.CSS(`[data-snooze=tomorrow]`)))
	ann.waitJS("snoozed again", status("snoozed"))
	v.typeAndSend("Any news?")
	ann.waitJS("reopened by the visitor", status("open"))
	ann.waitJS("and why", line("\u21a9 Reopened by the visitor\u2019s message"))

	// A visitor on Ann's other site: the site picker counts it.
	v2 := newTab(t, "visitor2")
	v2.openDemo(e.base, other.Key)
	v2.openChat()
	v2.typeAndSend("Hello over here")
	ann.waitJS("the other site's unread count", `Array.from(document.querySelector('#site').options).some(o => o.textContent === 'Zeta (1)')`)
	ann.noReload()
	ann.shot("unread-per-site")
	ann.do("the open list", chromedp.Click(chromedp.CSS(`[data-filter=open]`)))
	ann.waitJS("open again", listed)
	if last := eval[string](ann, `document.querySelector('#conversations li[data-id] .last').textContent`); last != "Any news?" {
		t.Fatalf("the list's preview is %q: an assignment or a snooze is not the last message", last)
	}
	ann.do("phone viewport", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2)))
	ann.shot("phone")
}
