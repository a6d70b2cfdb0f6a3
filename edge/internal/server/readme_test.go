package server_test

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// edge/README.md lists the stages in the order server.Run starts them: a map that lies is
// worse than none.
func TestStagesAreTheReadmes(t *testing.T) {
	src, err := os.ReadFile("server.go")
	if err != nil {
		t.Fatal(err)
	}
	var code []string
	for _, m := range regexp.MustCompile(`sg\.add\("([^"]+)"`).FindAllStringSubmatch(string(src), -1) {
		code = append(code, m[1])
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	table := string(readme)[strings.Index(string(readme), "| stage |"):]
	table = table[:strings.Index(table, "\n\n")]
	var doc []string
	for _, m := range regexp.MustCompile(`(?m)^\| ([a-zA-Z][^|]+?) \|`).FindAllStringSubmatch(table, -1) {
		if m[1] != "stage" {
			doc = append(doc, m[1])
		}
	}
	if strings.Join(code, "\n") != strings.Join(doc, "\n") {
		t.Fatalf("edge/README.md's stages:\n%s\n\nserver.Run's:\n%s", strings.Join(doc, "\n"), strings.Join(code, "\n"))
	}
}
