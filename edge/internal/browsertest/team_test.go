package browsertest

import (
	"bytes"
	"io"
	"log/slog"
	"mime/quotedprintable"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"spookat/edge/internal/server"
	"spookat/edge/internal/store"
	"spookat/loadgen/mock"
	"spookat/schema/testkit"
	"spookat/worker"
)

// Issue 34, point 3: an owner invites someone by email as an agent; the worker mails the
// link (a real SMTP server); the link shows what it is for, sets a password and logs in as
// an agent, who cannot open the site's settings; the owner sees the new member live and
// removes them, and the agent's inbox loses the site at once. A used link works no more.
func TestInviteJoinsAsAgent(t *testing.T) {
	mail, err := mock.StartSMTP()
	testkit.NoErr(t, err)
	t.Cleanup(func() { mail.Close() })
	wcfg := worker.DefaultConfig()
	wcfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	wcfg.SMTP.Host, wcfg.SMTP.Port, wcfg.SMTP.TLS, wcfg.SMTP.From = "127.0.0.1", mail.Port, "none", "spookat@team.test"
	e := startEdge(t, server.Config{Worker: &wcfg, InprocWorker: true})
	site := e.site(&store.Site{Name: "Teamwork"})
	const pw = "correct horse battery"
	e.operator("olivia@team.test", "Olivia", pw, site.Key)
	settings := e.base + "/app/#/sites/" + strconv.FormatInt(site.ID, 10) + "/settings"

	owner := newTab(t, "owner")
	owner.login(e.base, "olivia@team.test", pw)
	owner.do("open the settings", chromedp.Navigate(settings), chromedp.WaitVisible(chromedp.CSS("#invite-email")))
	owner.waitJS("Olivia, owner", `document.querySelector('#team-list li select.role').value === 'owner'`)
	owner.do("invite Zed as an agent", chromedp.SendKeys(chromedp.CSS("#invite-email"), "zed@team.test"),
		chromedp.Click(chromedp.CSS("#invite-send")))
	owner.waitJS("the link shown once", `document.querySelector('#invite-link').value.includes('/app/#/invite/')`)
	owner.waitJS("its email sent, live", `Array.from(document.querySelectorAll('#invite-list li')).some(li => li.textContent.includes('zed@team.test') && li.textContent.includes('email sent'))`)
	owner.do("to the team", chromedp.ScrollIntoView(chromedp.CSS("#team")))
	owner.shot("invited")

	var token string
	testkit.WaitFor(t, "the invitation's mail", 10*time.Second, func() bool { return len(mail.Mails()) == 1 })
	m := mail.Mails()[0]
	body, _ := io.ReadAll(quotedprintable.NewReader(bytes.NewReader(m.Data)))
	if len(m.To) != 1 || m.To[0] != "zed@team.test" || !bytes.Contains(body, []byte("Subject: Join Teamwork on spookat")) {
		t.Fatalf("mail to %v:\n%s", m.To, body)
	}
	if sub := regexp.MustCompile(`http://edge\.test/app/#/invite/([A-Za-z0-9_-]+)`).FindSubmatch(body); sub != nil {
		token = string(sub[1])
	} else {
		t.Fatalf("no link in the mail:\n%s", body)
	}
	link := e.base + "/app/#/invite/" + token

	zed := newTab(t, "zed")
	zed.do("phone viewport", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile))
	zed.do("open the link", chromedp.Navigate(link), chromedp.WaitVisible(chromedp.CSS("#invite-password")))
	zed.waitJS("says what for", `document.querySelector('#invite-what').textContent.includes('Olivia invited zed@team.test') && document.querySelector('#invite-what').textContent.includes('agent')`)
	zed.shot("invitation")
	zed.do("a name and a password", chromedp.SendKeys(chromedp.CSS("#invite-name"), "Zed"),
		chromedp.SendKeys(chromedp.CSS("#invite-password"), "a long enough one"), chromedp.Click(chromedp.CSS("#invite-accept")))
	zed.waitJS("logged in, the site's list, the token gone from the address", `document.querySelector('#conversations') && document.querySelector('#live[data-state=live]') && !location.hash.includes('invite')`)
	zed.do("open the settings", chromedp.Navigate(settings), chromedp.WaitVisible(chromedp.CSS("#owners-only")))
	if eval[bool](zed, `document.querySelector('#settings') !== null || document.querySelector('#team') !== null`) {
		t.Fatal("an agent sees the site's settings form or its team")
	}
	zed.shot("agent-settings")
	zedToken := e.apiToken("zed@team.test", "a long enough one")
	if st := e.api("GET", "/sites/"+strconv.FormatInt(site.ID, 10)+"/settings", zedToken, nil, nil); st != 403 {
		t.Fatalf("the agent reads the settings through the API: %d", st)
	}

	owner.waitJS("Zed in the team, live", `Array.from(document.querySelectorAll('#team-list li')).some(li => li.textContent.includes('zed@team.test') && li.querySelector('select.role').value === 'agent')`)
	owner.waitJS("the invitation used, gone from the list", `!document.querySelector('#invite-list').textContent.includes('zed@team.test')`)
	owner.do("remove Zed (twice: the second confirms)", chromedp.Click(chromedp.CSS(`#team-list li:last-child button.del`)), chromedp.Click(chromedp.CSS(`#team-list li:last-child button.del`)))
	owner.waitJS("Zed gone from the team", `!document.querySelector('#team-list').textContent.includes('zed@team.test')`)
	zed.waitJS("Zed's inbox without the site, at once", `document.querySelector('.placeholder') && document.querySelector('.placeholder').textContent.includes('not a member of any site')`)

	again := newTab(t, "again")
	again.do("the used link", chromedp.Navigate(link), chromedp.WaitVisible(chromedp.CSS("#invite-error")))
	again.waitJS("says it does not work", `document.querySelector('#invite-error').textContent.includes('does not work')`)
}
