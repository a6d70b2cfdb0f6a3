package store

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"spookat/schema"
	"spookat/schema/testkit"
)

// The words SQL compares authors, statuses, kinds and sources with are the schema's
// constants (schema.Author, ConvStatus, DeliveryStatus, MessageKind, Source): a renamed
// constant or a typo in a query fails here, not in a query that quietly matches nothing.
func TestSQLWordsAreTheSchemas(t *testing.T) {
	known := map[string][]string{
		"author": {string(schema.AuthorVisitor), string(schema.AuthorOperator), string(schema.AuthorSystem)},
		"status": {string(schema.ConvOpen), string(schema.ConvSnoozed), string(schema.ConvClosed),
			string(schema.StatusDelivered), string(schema.StatusRetrying), string(schema.StatusDead)},
		"kind": {"", string(schema.KindRating), string(schema.KindTranscript), string(schema.KindClosed),
			string(schema.KindReopened), string(schema.KindSnoozed), string(schema.KindAssigned)},
		"source": {string(schema.SourceWidget), string(schema.SourceInbox), string(schema.SourceSlack)},
	}
	files, _ := filepath.Glob("*.go")
	sql, _ := filepath.Glob("../../../schema/migrations/*.sql")
	compare := regexp.MustCompile(`\b(author|status|kind|source)\s*(?:=|!=|<>|DEFAULT)\s*'([^']*)'`)
	seen := 0
	for _, f := range append(files, sql...) {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		testkit.NoErr(t, err)
		for n, line := range strings.Split(string(b), "\n") {
			for _, m := range compare.FindAllStringSubmatch(line, -1) {
				seen++
				words := known[m[1]]
				ok := false
				for _, w := range words {
					ok = ok || w == m[2]
				}
				if !ok {
					t.Errorf("%s:%d: %s compared with '%s', which is none of the schema's %q", f, n+1, m[1], m[2], words)
				}
			}
		}
	}
	if seen < 15 {
		t.Fatalf("found %d comparisons: the pattern no longer matches the queries", seen)
	}
}
