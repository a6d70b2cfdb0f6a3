package browsertest

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"spookat/edge/internal/edgetest"
	"spookat/edge/internal/server"
	"spookat/edge/internal/store"
	"spookat/schema"
	"spookat/schema/testkit"
)

// Issue 34, point 5: a site's owner opens Reports and sees the first response time of a
// seeded day (yesterday a visitor waited 3 minutes, another 7: median 3 min, p90 7 min), the
// conversations per day, the busiest hours and the operators; the CSV says the same; an
// agent has no Reports. Desktop and phone.
func TestReportShowsFirstResponse(t *testing.T) {
	dir := t.TempDir()
	berlin, err := time.LoadLocation("Europe/Berlin")
	testkit.NoErr(t, err)
	y := time.Now().In(berlin).AddDate(0, 0, -1)
	day := time.Date(y.Year(), y.Month(), y.Day(), 0, 0, 0, 0, berlin)
	site := &store.Site{Name: "Counted", Origins: []string{"*"}, Widget: schema.WidgetSettings{TimeZone: "Europe/Berlin"}}
	func() { // the seeded day, written before the edge starts
		s, err := store.Open(dir, store.Options{})
		testkit.NoErr(t, err)
		defer s.Close()
		ctx := context.Background()
		testkit.NoErr(t, s.Write(ctx, func(tx *store.Tx) error { return tx.AddSite(site) }))
		n := 0
		say := func(req store.MessageRequest, at time.Time) store.MessageResult {
			n++
			ch := make(chan store.MessageResult, 1)
			req.SiteID, req.ClientID, req.Done = site.ID, strconv.Itoa(n), func(r store.MessageResult) { ch <- r }
			testkit.NoErr(t, s.SubmitMessage(&req))
			r := <-ch
			testkit.NoErr(t, r.Err)
			testkit.NoErr(t, s.Write(ctx, func(tx *store.Tx) error {
				if err := tx.Exec(`UPDATE messages SET created_at = ? WHERE id = ?`, at.UnixMilli(), r.MessageID); err != nil {
					return err
				}
				return tx.Exec(`UPDATE conversations SET created_at = min(created_at, ?), updated_at = ? WHERE id = ?`, at.UnixMilli(), at.UnixMilli(), r.ConversationID)
			}))
			return r
		}
		for i, wait := range []time.Duration{3 * time.Minute, 7 * time.Minute} {
			asked := day.Add(time.Duration(10+i) * time.Hour)
			q := say(store.MessageRequest{TokenHash: []byte("visitor-" + strconv.Itoa(i)), Author: schema.AuthorVisitor, Text: "How long does delivery take?"}, asked)
			say(store.MessageRequest{ConversationID: q.ConversationID, Author: schema.AuthorOperator, Name: "Olga", Text: "Two days."}, asked.Add(wait))
		}
	}()
	e := &env{t: t, edge: edgetest.Start(t, dir, server.Config{})}
	e.base = "http://" + e.edge.Addr
	const pw = "correct horse battery"
	e.operator("olga@count.test", "Olga", pw, site.Key)
	e.operator("andy@count.test", "Andy", pw, site.Key)
	token := e.apiToken("olga@count.test", pw)
	var members struct{ Members []store.Member }
	e.api("GET", "/sites/"+strconv.FormatInt(site.ID, 10)+"/members", token, nil, &members)
	for _, m := range members.Members {
		if m.Name == "Andy" {
			if st := e.api("PUT", "/sites/"+strconv.FormatInt(site.ID, 10)+"/members/"+strconv.FormatInt(m.ID, 10), token, map[string]any{"role": "agent"}, nil); st != 200 {
				t.Fatalf("Andy made an agent: %d", st)
			}
		}
	}

	label := day.Format(time.DateOnly)
	op := newTab(t, "owner")
	op.login(e.base, "olga@count.test", pw)
	op.do("open Reports", chromedp.Click(chromedp.CSS("#reports-link")), chromedp.WaitVisible(chromedp.CSS("#tile-first-response")))
	op.waitJS("the median first response: 3 min, 90% within 7 min", `document.querySelector('#tile-first-response').textContent.includes('3 min') && document.querySelector('#tile-first-response').textContent.includes('7 min')`)
	op.waitJS("the seeded day's row", `Array.from(document.querySelectorAll('#report-periods tr')).some(tr => tr.cells[0].textContent === '`+label+`' && tr.cells[1].textContent === '2' && tr.cells[4].textContent === '3 min / 7 min')`)
	op.waitJS("Olga by operator", `Array.from(document.querySelectorAll('#report-operators tr')).some(tr => tr.cells[0].textContent === 'Olga' && tr.cells[3].textContent === '2')`)
	op.waitJS("10:00 and 11:00 of that weekday among the busiest hours", `document.querySelectorAll('#report-hours td[style]').length === 2`)
	op.waitJS("two charts", `document.querySelectorAll('#reports svg.chart rect').length >= 60`)
	op.shot("reports")

	href := eval[string](op, `document.querySelector('#report-csv').getAttribute('href')`)
	req, _ := http.NewRequest("GET", e.base+href, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	testkit.NoErr(t, err)
	csv, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/csv") ||
		!strings.Contains(string(csv), "period,conversations,") || !strings.Contains(string(csv), label+",2,2,2,2,180,420,") {
		t.Fatalf("CSV %d %s:\n%s", resp.StatusCode, resp.Header.Get("Content-Type"), csv)
	}

	phone := newTab(t, "phone")
	phone.do("phone viewport", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile))
	phone.login(e.base, "olga@count.test", pw)
	phone.do("open Reports", chromedp.Navigate(e.base+"/app/#/sites/"+strconv.FormatInt(site.ID, 10)+"/reports"), chromedp.WaitVisible(chromedp.CSS("#tile-first-response")))
	phone.waitJS("3 min", `document.querySelector('#tile-first-response').textContent.includes('3 min')`)
	if n := eval[float64](phone, `document.querySelector('#tile-first-response').getBoundingClientRect().right - document.documentElement.clientWidth`); n > 0 {
		t.Fatalf("the tiles overflow a 390 px screen by %v px", n)
	}
	phone.shot("reports")

	// An agent: no link, and the API refuses.
	if st := e.api("GET", "/sites/"+strconv.FormatInt(site.ID, 10)+"/reports", e.apiToken("andy@count.test", pw), nil, nil); st != 403 {
		t.Fatalf("an agent's report: %d", st)
	}
	andy := newTab(t, "agent")
	andy.login(e.base, "andy@count.test", pw)
	andy.waitJS("no Reports link", `document.querySelector('#reports-link').hidden`)
}
