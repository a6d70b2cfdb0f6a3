package server

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"spookat/schema/testkit"
)

// edge/README.md lists the stages in the order Edge.stages starts them: a map that lies is
// worse than none.
func TestStagesAreTheReadmes(t *testing.T) {
	var code []string
	for _, st := range (&Edge{}).stages() {
		code = append(code, st.name)
	}
	readme, err := os.ReadFile("../../README.md")
	testkit.NoErr(t, err)
	table := string(readme)[strings.Index(string(readme), "| stage |"):]
	table = table[:strings.Index(table, "\n\n")]
	var doc []string
	for _, m := range regexp.MustCompile(`(?m)^\| ([a-zA-Z][^|]+?) \|`).FindAllStringSubmatch(table, -1) {
		if m[1] != "stage" {
			doc = append(doc, m[1])
		}
	}
	if strings.Join(code, "\n") != strings.Join(doc, "\n") {
		t.Fatalf("edge/README.md's stages:\n%s\n\nEdge.stages':\n%s", strings.Join(doc, "\n"), strings.Join(code, "\n"))
	}
}
