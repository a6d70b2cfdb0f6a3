package schema

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// WidgetSettings is how a site's chat window looks and who it says answers: set in the
// inbox's settings (PUT /v1/api/sites/{site}/settings, field "widget"), sent to the window in
// its hello. Every field is optional.
type WidgetSettings struct {
	// Title heads the window (default "Chat with us").
	Title string `json:"title,omitempty"`
	// Accent is the colour of the window's header, the visitor's bubbles and the buttons,
	// "#rrggbb". The launcher's is the embed's data-color (it is drawn before any request):
	// the settings page writes the snippet with both.
	Accent string `json:"accent,omitempty"`
	// Position is the corner, "right" (default) or "left", that the settings page's embed
	// snippet gives the launcher (data-position); the window opens by the launcher.
	Position string `json:"position,omitempty"`
	// LauncherLabel is the launcher's accessible name (default "Open chat").
	LauncherLabel string `json:"launcher_label,omitempty"`
	// Greeting is shown as the operators' first bubble before the visitor writes; it is never
	// stored as a message.
	Greeting string `json:"greeting,omitempty"`
	// Hours are the office hours, one rule a line: "mon-fri 09:00-17:30", "sat 10:00-14:00".
	// Empty: always open. Outside them the window is away whoever is online.
	Hours string `json:"hours,omitempty"`
	// TimeZone is the IANA zone of Hours (default UTC).
	TimeZone string `json:"time_zone,omitempty"`
	// ReplyTime tells a visitor when to expect an answer while someone is online
	// (default "We usually answer within minutes").
	ReplyTime string `json:"reply_time,omitempty"`
	// AwayMessage is shown while nobody is online or outside the hours
	// (default "We're away right now. Leave a message and your email: we'll answer by email.").
	AwayMessage string `json:"away_message,omitempty"`
	// AskEmail is when an away window asks for the visitor's email: "after" the first message
	// (default), "before" it, or "never".
	AskEmail string `json:"ask_email,omitempty"`
	// Language is the window's language when the embed has no data-lang: en, de, fr, es or pt
	// (default: the visitor's browser's).
	Language string `json:"language,omitempty"`
	// Strings overrides any of the window's texts by key (schema/PROTOCOL.md lists them),
	// whatever the language: {"send": "Go", "title": "Ask Acme"}.
	Strings map[string]string `json:"strings,omitempty"`
	// FileMaxMB is the largest attachment a visitor may send, in MB (default
	// DefaultFileMaxMB, at most MaxFileMaxMB); -1 turns attachments off. The hello carries the
	// limit in force.
	FileMaxMB int `json:"file_max_mb,omitempty"`
}

// MaxFileMaxMB bounds WidgetSettings.FileMaxMB whatever the edge allows.
const MaxFileMaxMB = 100

// FileLimit is the largest attachment in bytes under these settings (0: attachments off).
func (w *WidgetSettings) FileLimit() int64 {
	switch mb := int64(w.FileMaxMB); {
	case mb < 0:
		return 0
	case mb == 0:
		return DefaultFileMaxMB * 1_000_000
	default:
		return min(mb, MaxFileMaxMB) * 1_000_000
	}
}

// WidgetLanguages are the languages the window has every string in.
var WidgetLanguages = []string{"en", "de", "fr", "es", "pt"}

var stringKeyRE = regexp.MustCompile(`^[a-zA-Z]{1,32}$`)

// Widget settings limits.
const (
	MaxWidgetLabel = 80  // title, launcher label, reply time
	MaxWidgetText  = 500 // greeting, away message
)

var accentRE = regexp.MustCompile(`^#[0-9a-fA-F]{6}$`)

// Check returns a sentence naming the first field that is wrong and how to fix it, or nil.
// It trims the fields first.
func (w *WidgetSettings) Check() error {
	for _, f := range []struct {
		v    *string
		name string
		max  int
	}{{&w.Title, "title", MaxWidgetLabel}, {&w.LauncherLabel, "launcher_label", MaxWidgetLabel},
		{&w.ReplyTime, "reply_time", MaxWidgetLabel}, {&w.Greeting, "greeting", MaxWidgetText},
		{&w.AwayMessage, "away_message", MaxWidgetText}, {&w.Accent, "accent", 7}, {&w.Position, "position", 5},
		{&w.Hours, "hours", 1000}, {&w.TimeZone, "time_zone", 64}, {&w.AskEmail, "ask_email", 6}} {
		*f.v = strings.TrimSpace(CleanText(*f.v))
		if utf8.RuneCountInString(*f.v) > f.max {
			return fmt.Errorf("widget.%s is longer than %d characters", f.name, f.max)
		}
	}
	if w.Accent != "" && !accentRE.MatchString(w.Accent) {
		return fmt.Errorf("widget.accent must be a colour as #rrggbb, e.g. #4f46e5")
	}
	switch w.Position {
	case "", "right", "left":
	default:
		return fmt.Errorf(`widget.position must be "right" or "left"`)
	}
	if w.FileMaxMB < -1 || w.FileMaxMB > MaxFileMaxMB {
		return fmt.Errorf("widget.file_max_mb must be 1 to %d MB, 0 for the default (%d) or -1 to turn attachments off", MaxFileMaxMB, DefaultFileMaxMB)
	}
	switch w.AskEmail {
	case "", "after", "before", "never":
	default:
		return fmt.Errorf(`widget.ask_email must be "after", "before" or "never"`)
	}
	if w.TimeZone != "" {
		if _, err := time.LoadLocation(w.TimeZone); err != nil || w.TimeZone == "Local" {
			return fmt.Errorf("widget.time_zone must be an IANA time zone such as Europe/Berlin")
		}
	}
	if w.Language = strings.ToLower(strings.TrimSpace(w.Language)); w.Language != "" && !slices.Contains(WidgetLanguages, w.Language) {
		return fmt.Errorf("widget.language must be one of %s", strings.Join(WidgetLanguages, ", "))
	}
	if len(w.Strings) > 64 {
		return fmt.Errorf("widget.strings has %d texts; at most 64", len(w.Strings))
	}
	for k, v := range w.Strings {
		v = strings.TrimSpace(CleanText(v))
		switch {
		case !stringKeyRE.MatchString(k):
			return fmt.Errorf("widget.strings key %q must be letters only, as in schema/PROTOCOL.md (e.g. send)", k)
		case v == "":
			delete(w.Strings, k)
		case utf8.RuneCountInString(v) > MaxWidgetText:
			return fmt.Errorf("widget.strings.%s is longer than %d characters", k, MaxWidgetText)
		default:
			w.Strings[k] = v
		}
	}
	if _, err := ParseHours(w.Hours); err != nil {
		return fmt.Errorf("widget.hours: %v", err)
	}
	return nil
}

// OfficeHours are a site's hours, parsed once, in their zone.
type OfficeHours struct {
	Rules []HoursRule // none: always open
	Loc   *time.Location
}

// OfficeHours parses the settings' hours and zone; hours that do not parse (Check refuses
// them) or an unknown zone read as always open, in UTC.
func (w *WidgetSettings) OfficeHours() OfficeHours {
	h := OfficeHours{Loc: time.UTC}
	if rules, err := ParseHours(w.Hours); err == nil {
		h.Rules = rules
	}
	if w.TimeZone != "" {
		if l, err := time.LoadLocation(w.TimeZone); err == nil {
			h.Loc = l
		}
	}
	return h
}

// OpenAt reports whether t is within the office hours (always, without hours).
func (w *WidgetSettings) OpenAt(t time.Time) bool { return w.OfficeHours().OpenAt(t) }

// NextOpen is when the office hours next begin after t (t itself when open now); the zero
// time without hours.
func (w *WidgetSettings) NextOpen(t time.Time) time.Time { return w.OfficeHours().NextOpen(t) }

// OpenAt reports whether t is within the hours (always, without any).
func (h OfficeHours) OpenAt(t time.Time) bool {
	if len(h.Rules) == 0 {
		return true
	}
	t = t.In(h.Loc)
	minute := t.Hour()*60 + t.Minute()
	for _, r := range h.Rules {
		if r.Days&(1<<t.Weekday()) != 0 && minute >= r.From && minute < r.To {
			return true
		}
	}
	return false
}

// NextOpen is when the hours next begin after t (t itself when open now); the zero time
// without hours.
func (h OfficeHours) NextOpen(t time.Time) time.Time {
	if len(h.Rules) == 0 {
		return time.Time{}
	}
	if h.OpenAt(t) {
		return t
	}
	lt := t.In(h.Loc)
	for d := 0; d <= 7; d++ {
		day := time.Date(lt.Year(), lt.Month(), lt.Day()+d, 0, 0, 0, 0, h.Loc)
		var best time.Time
		for _, r := range h.Rules {
			if r.Days&(1<<day.Weekday()) == 0 {
				continue
			}
			at := time.Date(day.Year(), day.Month(), day.Day(), r.From/60, r.From%60, 0, 0, h.Loc)
			if at.After(t) && (best.IsZero() || at.Before(best)) {
				best = at
			}
		}
		if !best.IsZero() {
			return best
		}
	}
	return time.Time{}
}

// HoursRule is one line of office hours: the weekdays it covers (bit 0 Sunday … bit 6
// Saturday) and the minutes of the day from From (inclusive) to To (exclusive).
type HoursRule struct {
	Days     uint8
	From, To int
}

var dayNames = []string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"}

// ParseHours reads office hours, one rule a line ("mon-fri 09:00-17:30", "sat,sun 10:00-14:00";
// "24:00" ends a day).
func ParseHours(s string) ([]HoursRule, error) {
	var out []HoursRule
	for n, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		bad := func(why string) error {
			return fmt.Errorf("line %d %q: %s; write e.g. \"mon-fri 09:00-17:30\"", n+1, line, why)
		}
		days, span, ok := strings.Cut(line, " ")
		if !ok {
			return nil, bad("days and times are separated by a space")
		}
		var r HoursRule
		for _, part := range strings.Split(strings.ToLower(days), ",") {
			a, b, isRange := strings.Cut(part, "-")
			from, to := dayIndex(a), dayIndex(a)
			if isRange {
				to = dayIndex(b)
			}
			if from < 0 || to < 0 {
				return nil, bad("days are mon, tue, wed, thu, fri, sat, sun")
			}
			for d := from; ; d = (d + 1) % 7 {
				r.Days |= 1 << d
				if d == to {
					break
				}
			}
		}
		a, b, ok := strings.Cut(strings.TrimSpace(span), "-")
		if r.From, ok = clock(a); !ok {
			return nil, bad("times are HH:MM")
		}
		if r.To, ok = clock(b); !ok {
			return nil, bad("times are HH:MM")
		}
		if r.To <= r.From {
			return nil, bad("the end must be after the start (a span past midnight is two rules)")
		}
		out = append(out, r)
	}
	return out, nil
}

func dayIndex(s string) int {
	for i, d := range dayNames {
		if s == d {
			return i
		}
	}
	return -1
}

func clock(s string) (int, bool) {
	h, m, ok := strings.Cut(strings.TrimSpace(s), ":")
	if !ok || len(h) != 2 || len(m) != 2 {
		return 0, false
	}
	hh, err1 := strconv.Atoi(h)
	mm, err2 := strconv.Atoi(m)
	if err1 != nil || err2 != nil || mm > 59 || hh > 24 || hh == 24 && mm != 0 {
		return 0, false
	}
	return hh*60 + mm, true
}
