package mock

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// Server puts the three mocks behind one address:
//
//	/api/chat.postMessage          Slack (point the worker's -slack-api at http://ADDR/api/)
//	/api/webhooks/<id>/<token>     Discord (-discord-api http://ADDR/api)
//	/hooks/…                       webhook receiver (see Receiver for the paths)
//	/stats                         JSON counts; /posts[?channel=C] the Slack posts; POST /reset
type Server struct {
	Slack    *Slack
	Discord  *Discord
	Receiver *Receiver
}

// Stats is what /stats answers.
type Stats struct {
	SlackPosts       int   `json:"slack_posts"`
	SlackLines       int   `json:"slack_lines"` // messages, counting each line of a merged post
	Slack429         int64 `json:"slack_429"`
	DiscordPosts     int   `json:"discord_posts"`
	Discord429       int64 `json:"discord_429"`
	WebhookEvents    int   `json:"webhook_events"`
	WebhookValid     int   `json:"webhook_valid"`
	WebhookDelivered int   `json:"webhook_delivered"` // answered 2xx
}

// Stats counts what the mocks received.
func (s *Server) Stats() Stats {
	var st Stats
	for _, p := range s.Slack.Posts() {
		st.SlackPosts++
		st.SlackLines += countLines(p)
	}
	st.Slack429 = s.Slack.RateLimited()
	st.DiscordPosts = len(s.Discord.Posts())
	st.Discord429 = s.Discord.RateLimited()
	for _, e := range s.Receiver.Events() {
		st.WebhookEvents++
		if e.Valid {
			st.WebhookValid++
		}
		if e.Status >= 200 && e.Status < 300 {
			st.WebhookDelivered++
		}
	}
	return st
}

// countLines counts the messages in a post: a reply carries one message per line, a parent
// post one header line and then its messages.
func countLines(p Post) int {
	n := 1
	for _, c := range p.Text {
		if c == '\n' {
			n++
		}
	}
	if p.ThreadTS == "" && n > 1 {
		n--
	}
	return n
}

// Handler routes to the mocks.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/api/webhooks/", s.Discord)
	mux.Handle("/api/", s.Slack)
	mux.Handle("/hooks/", s.Receiver)
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, 200, s.Stats()) })
	mux.HandleFunc("GET /posts", func(w http.ResponseWriter, r *http.Request) {
		ch := r.URL.Query().Get("channel")
		out := []Post{}
		for _, p := range s.Slack.Posts() {
			if ch == "" || p.Channel == ch {
				out = append(out, p)
			}
		}
		writeJSON(w, 200, out)
	})
	mux.HandleFunc("POST /reset", func(w http.ResponseWriter, _ *http.Request) {
		s.Slack.Reset()
		w.WriteHeader(http.StatusNoContent)
	})
	return mux
}

// Protocols is what the mocks serve: HTTP/1.1 (the worker's Slack client), and HTTP/2 without
// TLS (h2c, prior knowledge) for a worker run with -h2c, whose Discord posts then share a few
// connections as they do over TLS with the real Discord.
func Protocols() *http.Protocols {
	p := new(http.Protocols)
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	return p
}

// Run is `loadgen mock`: serve the mocks until SIGINT/SIGTERM.
func Run(args []string) error {
	fs := flag.NewFlagSet("mock", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:9900", "listen address")
	latency := fs.Duration("latency", 50*time.Millisecond, "answer every post after this long")
	realistic := fs.Bool("realistic", false, "Slack: ~1 post/s per channel with short bursts, 429 + Retry-After past it")
	rate := fs.Float64("slack-rate", 1, "realistic mode: posts per second per channel")
	burst := fs.Int("slack-burst", 3, "realistic mode: burst per channel")
	discordLimit := fs.Int("discord-limit", 5, "Discord: posts per webhook per 2 s")
	secret := fs.String("webhook-secret", "whsec_c3Bvb2thdC1tb2NrLXNlY3JldA==", "secret the webhook receiver verifies with")
	if err := fs.Parse(args); err != nil {
		return err
	}
	s := &Server{
		Slack:    NewSlack(SlackOptions{Latency: *latency, Realistic: *realistic, Rate: *rate, Burst: *burst}),
		Discord:  NewDiscord(DiscordOptions{Latency: *latency, Limit: *discordLimit}),
		Receiver: NewReceiver(ReceiverOptions{Secret: *secret, Latency: *latency}),
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 5 * time.Second, Protocols: Protocols()}
	fmt.Fprintf(os.Stderr, "mock: listening on http://%s (slack api http://%s/api/, HTTP/1.1 and h2c, realistic=%v, latency=%s)\n", ln.Addr(), ln.Addr(), *realistic, *latency)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return err
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return srv.Shutdown(sctx)
	}
}

// answerAfter waits the mock's latency before it answers; false when the client gave up.
func answerAfter(r *http.Request, latency time.Duration) bool {
	if latency <= 0 {
		return true
	}
	t := time.NewTimer(latency)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	}
}
