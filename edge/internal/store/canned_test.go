package store

import (
	"context"
	"errors"
	"strings"
	"testing"

	"spookat/schema/testkit"
)

// Canned replies: added, listed by title, edited, removed; a title is one per site in any
// case; another site's reply can be neither edited nor removed; what cannot be stored says why.
func TestCannedReplies(t *testing.T) {
	ctx := context.Background()
	s, site, op := searchStore(t)
	other := addSite(t, s)
	save := func(c *CannedReply) error { return s.Write(ctx, func(tx *Tx) error { return tx.SaveCanned(c, op.ID) }) }

	hello := &CannedReply{SiteID: site.ID, Title: "  Hello ", Text: "Hi {{visitor.name|there}}, I am {{operator.name}}. "}
	testkit.NoErr(t, save(hello))
	if hello.ID == 0 || hello.Title != "Hello" || hello.Text != "Hi {{visitor.name|there}}, I am {{operator.name}}." || hello.UpdatedBy != "Ann" || hello.UpdatedAt == 0 {
		t.Fatalf("saved %+v", hello)
	}
	testkit.NoErr(t, save(&CannedReply{SiteID: site.ID, Title: "Refunds", Text: "Refunds take 5 days."}))
	testkit.NoErr(t, save(&CannedReply{SiteID: other.ID, Title: "Hello", Text: "Another site's hello."})) // titles are per site

	for _, c := range []struct {
		name  string
		reply CannedReply
		want  string
	}{
		{"same title, other case", CannedReply{SiteID: site.ID, Title: "HELLO", Text: "x"}, "titled “Hello” already"},
		{"no title", CannedReply{SiteID: site.ID, Title: "  ", Text: "x"}, "Give the canned reply a title"},
		{"long title", CannedReply{SiteID: site.ID, Title: strings.Repeat("t", CannedTitleMax+1), Text: "x"}, "at most 80"},
		{"two-line title", CannedReply{SiteID: site.ID, Title: "a\nb", Text: "x"}, "one line"},
		{"no text", CannedReply{SiteID: site.ID, Title: "Empty"}, "Write the reply"},
		{"long text", CannedReply{SiteID: site.ID, Title: "Long", Text: strings.Repeat("é", 4001)}, "at most 4000"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := save(&c.reply)
			if !errors.Is(err, ErrCannedInvalid) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("%v; want ErrCannedInvalid saying %q", err, c.want)
			}
		})
	}

	list, err := s.CannedReplies(ctx, site.ID)
	testkit.NoErr(t, err)
	if len(list) != 2 || list[0].Title != "Hello" || list[1].Title != "Refunds" {
		t.Fatalf("listed %+v", list)
	}
	edit := *hello
	edit.Title, edit.Text = "Hello again", "Welcome back!"
	testkit.NoErr(t, save(&edit))
	if edit.ID != hello.ID || edit.Title != "Hello again" {
		t.Fatalf("edited %+v", edit)
	}
	theirs := edit
	theirs.SiteID = other.ID // an id of this site, said to be the other's
	if err := save(&theirs); !errors.Is(err, ErrNotFound) {
		t.Fatalf("edit through another site: %v", err)
	}
	if err := s.Write(ctx, func(tx *Tx) error { return tx.DeleteCanned(other.ID, hello.ID) }); !errors.Is(err, ErrNotFound) {
		t.Fatalf("delete through another site: %v", err)
	}
	testkit.NoErr(t, s.Write(ctx, func(tx *Tx) error { return tx.DeleteCanned(site.ID, hello.ID) }))
	list, err = s.CannedReplies(ctx, site.ID)
	testkit.NoErr(t, err)
	if len(list) != 1 || list[0].Title != "Refunds" {
		t.Fatalf("after the delete: %+v", list)
	}
}
