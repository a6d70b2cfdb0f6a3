package schema

import (
	"strings"
	"testing"
	"time"
)

func TestWidgetSettingsCheck(t *testing.T) {
	for _, c := range []struct {
		name string
		w    WidgetSettings
		bad  string // a word the sentence must name; "" for valid
	}{
		{"empty", WidgetSettings{}, ""},
		{"all set", WidgetSettings{Title: "Acme", Accent: "#0A7cff", Position: "left", Greeting: "Hi!",
			Hours: "mon-fri 09:00-17:30\nsat 10:00-14:00", TimeZone: "Europe/Berlin", AskEmail: "before"}, ""},
		{"accent", WidgetSettings{Accent: "blue"}, "accent"},
		{"position", WidgetSettings{Position: "top"}, "position"},
		{"ask_email", WidgetSettings{AskEmail: "always"}, "ask_email"},
		{"zone", WidgetSettings{TimeZone: "Mars/Olympus"}, "time_zone"},
		{"hours day", WidgetSettings{Hours: "mondays 09:00-17:00"}, "days"},
		{"hours time", WidgetSettings{Hours: "mon 9-17"}, "HH:MM"},
		{"hours order", WidgetSettings{Hours: "mon 17:00-09:00"}, "after the start"},
		{"long greeting", WidgetSettings{Greeting: strings.Repeat("a", MaxWidgetText+1)}, "greeting"},
		{"language", WidgetSettings{Language: "DE", Strings: map[string]string{"send": "Los"}}, ""},
		{"unknown language", WidgetSettings{Language: "xx"}, "language"},
		{"string key", WidgetSettings{Strings: map[string]string{"<b>": "x"}}, "strings key"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.w.Check()
			switch {
			case c.bad == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.bad != "" && (err == nil || !strings.Contains(err.Error(), c.bad)):
				t.Fatalf("got %v, want a sentence naming %q", err, c.bad)
			}
		})
	}
}

func TestOpenAt(t *testing.T) {
	w := WidgetSettings{Hours: "mon-fri 09:00-17:30\nsun 10:00-24:00", TimeZone: "America/New_York"}
	ny, _ := time.LoadLocation("America/New_York")
	for _, c := range []struct {
		at   time.Time
		open bool
	}{
		{time.Date(2026, 12, 2, 9, 0, 0, 0, ny), true},    // Wednesday, opening minute
		{time.Date(2026, 12, 2, 17, 30, 0, 0, ny), false}, // closing minute
		{time.Date(2026, 12, 2, 8, 59, 0, 0, ny), false},
		{time.Date(2026, 12, 5, 12, 0, 0, 0, ny), false},      // Saturday
		{time.Date(2026, 12, 6, 23, 59, 0, 0, ny), true},      // Sunday to midnight
		{time.Date(2026, 12, 2, 14, 0, 0, 0, time.UTC), true}, // 09:00 in New York
	} {
		if got := w.OpenAt(c.at); got != c.open {
			t.Errorf("%v: open %v, want %v", c.at, got, c.open)
		}
	}
	if !(&WidgetSettings{}).OpenAt(time.Now()) {
		t.Error("without hours a site is always open")
	}
	r, err := ParseHours("sat-mon 10:00-11:00")
	if err != nil || r[0].Days != 1<<6|1<<0|1<<1 {
		t.Fatalf("a range across the week's end: %+v %v", r, err)
	}
}

func TestNextOpen(t *testing.T) {
	w := WidgetSettings{Hours: "mon-fri 09:00-17:30\nsat 10:00-12:00", TimeZone: "Europe/Berlin"}
	be, _ := time.LoadLocation("Europe/Berlin")
	for _, c := range []struct{ at, want time.Time }{
		{time.Date(2026, 12, 2, 20, 0, 0, 0, be), time.Date(2026, 12, 3, 9, 0, 0, 0, be)},  // Wednesday night
		{time.Date(2026, 12, 2, 7, 0, 0, 0, be), time.Date(2026, 12, 2, 9, 0, 0, 0, be)},   // Wednesday early
		{time.Date(2026, 12, 4, 18, 0, 0, 0, be), time.Date(2026, 12, 5, 10, 0, 0, 0, be)}, // Friday night: Saturday
		{time.Date(2026, 12, 5, 13, 0, 0, 0, be), time.Date(2026, 12, 7, 9, 0, 0, 0, be)},  // Saturday afternoon: Monday
		{time.Date(2026, 12, 2, 10, 0, 0, 0, be), time.Date(2026, 12, 2, 10, 0, 0, 0, be)}, // open now
	} {
		if got := w.NextOpen(c.at); !got.Equal(c.want) {
			t.Errorf("%v: next open %v, want %v", c.at, got, c.want)
		}
	}
	if !(&WidgetSettings{}).NextOpen(time.Now()).IsZero() {
		t.Error("without hours there is no next opening")
	}
}
