package stairs

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
)

// Site is one seeded site.
type Site struct {
	ID  int64  `json:"id"`
	Key string `json:"key"`
}

// Seed runs `<edgeBin> seed -data DIR -sites N -json [-slack-token T]` (which goes through the
// running edge when one holds the data directory) and returns the sites it printed.
func Seed(ctx context.Context, edgeBin, dataDir string, n int, slackToken string, extra ...string) ([]Site, error) {
	args := []string{"seed", "-data", dataDir, "-sites", strconv.Itoa(n), "-json"}
	if slackToken != "" {
		args = append(args, "-slack-token", slackToken)
	}
	args = append(args, extra...)
	cmd := exec.CommandContext(ctx, edgeBin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &errb
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s %v: %v: %s", edgeBin, args, err, bytes.TrimSpace(errb.Bytes()))
	}
	sites, err := ParseSites(out.Bytes())
	if err != nil {
		return nil, fmt.Errorf("%s seed: %w", edgeBin, err)
	}
	if len(sites) == 0 {
		return nil, fmt.Errorf("%s seed printed no sites", edgeBin)
	}
	return sites, nil
}

// ParseSites reads `{"sites":[{"id":1,"key":"…"},…]}` (or a bare array of sites).
func ParseSites(data []byte) ([]Site, error) {
	var wrapped struct {
		Sites []Site `json:"sites"`
	}
	if err := json.Unmarshal(data, &wrapped); err == nil && wrapped.Sites != nil {
		return wrapped.Sites, nil
	}
	var bare []Site
	if err := json.Unmarshal(data, &bare); err != nil {
		return nil, fmt.Errorf("want {\"sites\":[{\"id\":…,\"key\":…}]}: %w (got %.200s)", err, data)
	}
	return bare, nil
}

// LoadSites reads a file in the form Seed prints (so a run can reuse the sites of an earlier
// seed with -sites-file).
func LoadSites(path string) ([]Site, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseSites(data)
}

// Keys returns the sites' keys.
func Keys(sites []Site) []string {
	keys := make([]string, len(sites))
	for i, s := range sites {
		keys[i] = s.Key
	}
	return keys
}
