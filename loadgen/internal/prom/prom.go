// Package prom reads the Prometheus text exposition format (what /metrics serves) well enough
// for loadgen: sample values by name and labels, and histograms, with the quantile estimate
// Prometheus's histogram_quantile makes (linear interpolation inside a bucket).
package prom

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
)

// Sample is one line of the exposition: a series and its value.
type Sample struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// Metrics is a parsed scrape.
type Metrics struct {
	Samples []Sample
	byName  map[string][]int
}

// Parse reads the text exposition format. Comment lines (# HELP, # TYPE) are skipped;
// a line it cannot read is an error that names the line.
func Parse(r io.Reader) (*Metrics, error) {
	m := &Metrics{byName: map[string][]int{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	n := 0
	for sc.Scan() {
		n++
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		s, err := parseLine(string(line))
		if err != nil {
			return nil, fmt.Errorf("prom: line %d: %w", n, err)
		}
		m.byName[s.Name] = append(m.byName[s.Name], len(m.Samples))
		m.Samples = append(m.Samples, s)
	}
	return m, sc.Err()
}

func parseLine(line string) (Sample, error) {
	var s Sample
	i := strings.IndexAny(line, "{ \t")
	if i < 0 {
		return s, fmt.Errorf("no value in %q", line)
	}
	s.Name = line[:i]
	rest := line[i:]
	if rest[0] == '{' {
		labels, n, err := parseLabels(rest)
		if err != nil {
			return s, err
		}
		s.Labels = labels
		rest = rest[n:]
	}
	f := strings.Fields(rest)
	if len(f) == 0 {
		return s, fmt.Errorf("no value in %q", line)
	}
	v, err := parseFloat(f[0])
	if err != nil {
		return s, fmt.Errorf("value of %s: %w", s.Name, err)
	}
	s.Value = v
	return s, nil
}

// parseLabels reads `{a="x",b="y\"z"}` and returns the labels and the bytes consumed.
func parseLabels(s string) (map[string]string, int, error) {
	labels := map[string]string{}
	i := 1
	for {
		for i < len(s) && (s[i] == ' ' || s[i] == ',') {
			i++
		}
		if i >= len(s) {
			return nil, 0, fmt.Errorf("unterminated labels in %q", s)
		}
		if s[i] == '}' {
			return labels, i + 1, nil
		}
		eq := strings.IndexByte(s[i:], '=')
		if eq < 0 {
			return nil, 0, fmt.Errorf("label without '=' in %q", s)
		}
		name := strings.TrimSpace(s[i : i+eq])
		i += eq + 1
		for i < len(s) && s[i] == ' ' {
			i++
		}
		if i >= len(s) || s[i] != '"' {
			return nil, 0, fmt.Errorf("label %s: value not quoted", name)
		}
		i++
		var b strings.Builder
		for {
			if i >= len(s) {
				return nil, 0, fmt.Errorf("label %s: unterminated value", name)
			}
			c := s[i]
			if c == '"' {
				i++
				break
			}
			if c == '\\' && i+1 < len(s) {
				i++
				switch s[i] {
				case 'n':
					b.WriteByte('\n')
				default:
					b.WriteByte(s[i])
				}
				i++
				continue
			}
			b.WriteByte(c)
			i++
		}
		labels[name] = b.String()
	}
}

func parseFloat(s string) (float64, error) {
	switch s {
	case "+Inf", "Inf":
		return math.Inf(1), nil
	case "-Inf":
		return math.Inf(-1), nil
	}
	return strconv.ParseFloat(s, 64)
}

// Has reports whether any series has this name.
func (m *Metrics) Has(name string) bool { return len(m.byName[name]) > 0 }

// Sum adds the values of every series with this name (a counter without labels is just its
// value; one with labels is the total over them).
func (m *Metrics) Sum(name string) float64 {
	var t float64
	for _, i := range m.byName[name] {
		t += m.Samples[i].Value
	}
	return t
}

// Bucket is one cumulative histogram bucket: Count observations were ≤ UpperBound.
type Bucket struct {
	UpperBound float64
	Count      float64
}

// Histogram returns the buckets of histogram name (the series name_bucket), summed over any
// other labels, sorted by upper bound, with +Inf last. Nil when there is no such histogram.
func (m *Metrics) Histogram(name string) []Bucket {
	idx := m.byName[name+"_bucket"]
	if len(idx) == 0 {
		return nil
	}
	sums := map[float64]float64{}
	for _, i := range idx {
		s := m.Samples[i]
		le, err := parseFloat(s.Labels["le"])
		if err != nil {
			continue
		}
		sums[le] += s.Value
	}
	out := make([]Bucket, 0, len(sums))
	for le, c := range sums {
		out = append(out, Bucket{UpperBound: le, Count: c})
	}
	sort.Slice(out, func(a, b int) bool { return out[a].UpperBound < out[b].UpperBound })
	return out
}

// Delta returns after − before bucket by bucket (the observations between two scrapes).
// Buckets are matched by upper bound; a bucket missing from before counts as zero.
func Delta(before, after []Bucket) []Bucket {
	prev := make(map[float64]float64, len(before))
	for _, b := range before {
		prev[b.UpperBound] = b.Count
	}
	out := make([]Bucket, len(after))
	for i, b := range after {
		c := b.Count - prev[b.UpperBound]
		if c < 0 { // the process restarted between the scrapes
			c = b.Count
		}
		out[i] = Bucket{UpperBound: b.UpperBound, Count: c}
	}
	return out
}

// Total is the number of observations (the count of the last bucket, +Inf).
func Total(buckets []Bucket) float64 {
	if len(buckets) == 0 {
		return 0
	}
	return buckets[len(buckets)-1].Count
}

// Quantile estimates the q-quantile (0 ≤ q ≤ 1) of cumulative buckets the way Prometheus's
// histogram_quantile does: find the bucket holding rank q·total and interpolate linearly
// between its lower and upper bound. A rank in the +Inf bucket returns the highest finite
// upper bound; the first bucket's lower bound is 0 unless its upper bound is ≤ 0. NaN when
// there are no observations.
func Quantile(q float64, buckets []Bucket) float64 {
	if len(buckets) == 0 || math.IsNaN(q) {
		return math.NaN()
	}
	if !math.IsInf(buckets[len(buckets)-1].UpperBound, 1) {
		return math.NaN()
	}
	if q < 0 {
		return math.Inf(-1)
	}
	if q > 1 {
		return math.Inf(1)
	}
	total := buckets[len(buckets)-1].Count
	if total == 0 {
		return math.NaN()
	}
	rank := q * total
	i := sort.Search(len(buckets)-1, func(i int) bool { return buckets[i].Count >= rank })
	if i == len(buckets)-1 { // the +Inf bucket
		if len(buckets) < 2 {
			return math.NaN()
		}
		return buckets[len(buckets)-2].UpperBound
	}
	if i == 0 && buckets[0].UpperBound <= 0 {
		return buckets[0].UpperBound
	}
	lower, below := 0.0, 0.0
	if i > 0 {
		lower, below = buckets[i-1].UpperBound, buckets[i-1].Count
	}
	upper := buckets[i].UpperBound
	inBucket := buckets[i].Count - below
	if inBucket <= 0 {
		return upper
	}
	return lower + (upper-lower)*(rank-below)/inBucket
}

// InOverflow reports whether the q-quantile falls in the +Inf bucket, where Quantile can only
// say "at least the highest finite bound".
func InOverflow(q float64, buckets []Bucket) bool {
	n := len(buckets)
	if n < 2 || !math.IsInf(buckets[n-1].UpperBound, 1) {
		return false
	}
	total := buckets[n-1].Count
	return total > 0 && buckets[n-2].Count < q*total
}

// Max is the upper bound of the highest bucket that gained an observation (an upper bound on
// the largest value); the highest finite bound if observations reached +Inf.
func Max(buckets []Bucket) float64 {
	for i := len(buckets) - 1; i >= 0; i-- {
		below := 0.0
		if i > 0 {
			below = buckets[i-1].Count
		}
		if buckets[i].Count > below {
			if math.IsInf(buckets[i].UpperBound, 1) && i > 0 {
				return buckets[i-1].UpperBound
			}
			return buckets[i].UpperBound
		}
	}
	return math.NaN()
}

// Scrape fetches and parses url (e.g. http://127.0.0.1:8080/metrics).
func Scrape(ctx context.Context, c *http.Client, url string) (*Metrics, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("prom: GET %s: %s", url, resp.Status)
	}
	return Parse(resp.Body)
}
