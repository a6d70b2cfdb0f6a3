package slack

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpproxy"

	"spookat/schema/fastjson"
	"spookat/worker/internal/rawtcp"
)

// api calls chat.postMessage (and reactions.add / reactions.remove, for a conversation's
// status) over fasthttp with a JSON body: slack-go did the same through net/http at about
// twice the CPU a post (form encoding, reflective decoding, net/http's per-request goroutines
// and allocations; bench/comments.md); here most of it is the socket write and read. Slack's documented
// answers are kept: 200 with "ok": false and an error code, 429 with Retry-After, other
// statuses.
type api struct {
	post, react, unreact *fasthttp.URI // parsed once; copied into each request
	http                 *fasthttp.Client
}

// newAPI builds the client of the Web API at base (ending in "/").
func newAPI(base string, c *fasthttp.Client) api {
	uri := func(method string) *fasthttp.URI {
		u := fasthttp.AcquireURI()
		if err := u.Parse(nil, []byte(base+method)); err != nil {
			panic(err) // the worker checked -slack-api at start
		}
		return u
	}
	return api{post: uri("chat.postMessage"), react: uri("reactions.add"), unreact: uri("reactions.remove"), http: c}
}

// NewHTTP is the keep-alive client for Slack: one connection per post in flight (Slack
// speaks HTTP/1.1 and HTTP/2; fasthttp is HTTP/1.1 only), HTTPS_PROXY/NO_PROXY honoured.
func NewHTTP(maxConns int) *fasthttp.Client {
	return &fasthttp.Client{
		Name:                "spookat-worker",
		MaxConnsPerHost:     maxConns,
		MaxConnWaitTimeout:  10 * time.Second,
		MaxIdleConnDuration: 30 * time.Second, // under the usual 60 s idle timeouts of load balancers
		Dial:                rawtcp.WrapDial(fasthttpproxy.FasthttpProxyHTTPDialerTimeout(5 * time.Second)),
		// Never retry a post on another connection: a post is not idempotent (the lane
		// retries it, in order, after classifying the failure).
		RetryIf: func(*fasthttp.Request) bool { return false },
	}
}

// apiError is Slack's "ok": false answer.
type apiError struct{ code string }

func (e *apiError) Error() string { return "slack: " + e.code }

// statusError is an HTTP status other than 200 and 429.
type statusError struct{ status int }

func (e *statusError) Error() string { return "slack: http " + strconv.Itoa(e.status) }

// rateLimitedError is a 429; after is its Retry-After.
type rateLimitedError struct{ after time.Duration }

func (e *rateLimitedError) Error() string { return "slack: rate limited for " + e.after.String() }

var bodies = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// postMessage posts text to channel (in thread when it is not "") and returns the post's ts.
// ctx is checked first (a hard stop); the post itself ends by deadline.
func (a *api) postMessage(ctx context.Context, deadline time.Time, token, channel, thread, text string) (string, error) {
	bp := bodies.Get().(*[]byte)
	defer bodies.Put(bp)
	body := append((*bp)[:0], `{"channel":`...)
	body = fastjson.AppendString(body, channel)
	if thread != "" {
		body = append(body, `,"thread_ts":`...)
		body = fastjson.AppendString(body, thread)
	}
	body = append(body, `,"text":`...)
	body = fastjson.AppendString(body, text)
	body = append(body, '}')
	*bp = body[:0]
	r, err := a.call(ctx, deadline, a.post, token, body)
	return r.TS, err
}

// reaction adds (on) or removes a reaction of the bot's to the post ts in channel. Adding one
// there already and removing one not there are done, not errors: a retried job does either.
func (a *api) reaction(ctx context.Context, deadline time.Time, token, channel, ts, name string, on bool) error {
	uri, done := a.react, "already_reacted"
	if !on {
		uri, done = a.unreact, "no_reaction"
	}
	body := append([]byte(`{"channel":`), fastjson.AppendString(nil, channel)...)
	body = append(append(body, `,"timestamp":`...), fastjson.AppendString(nil, ts)...)
	body = append(append(body, `,"name":`...), fastjson.AppendString(nil, name)...)
	body = append(body, '}')
	_, err := a.call(ctx, deadline, uri, token, body)
	if ae, ok := err.(*apiError); ok && ae.code == done {
		return nil
	}
	return err
}

// call sends one JSON request to a Web API method and reads Slack's answer.
func (a *api) call(ctx context.Context, deadline time.Time, uri *fasthttp.URI, token string, body []byte) (answer, error) {
	if err := ctx.Err(); err != nil {
		return answer{}, err
	}
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetURI(uri)
	req.Header.SetMethod(fasthttp.MethodPost)
	req.Header.SetContentType("application/json; charset=utf-8")
	hp := bodies.Get().(*[]byte)
	defer bodies.Put(hp)
	*hp = append(append((*hp)[:0], "Bearer "...), token...)
	req.Header.SetBytesV("Authorization", *hp) // copied
	req.SetBodyRaw(body)

	if err := a.http.DoDeadline(req, resp, deadline); err != nil {
		return answer{}, fmt.Errorf("slack: %w", err)
	}
	switch status := resp.StatusCode(); status {
	case fasthttp.StatusOK:
	case fasthttp.StatusTooManyRequests:
		after, _ := strconv.Atoi(string(resp.Header.Peek("Retry-After")))
		return answer{}, &rateLimitedError{after: time.Duration(after) * time.Second}
	default:
		return answer{}, &statusError{status: status}
	}
	r, err := decodeAnswer(resp.Body())
	if err != nil {
		return answer{}, fmt.Errorf("slack: unreadable answer: %w", err)
	}
	if !r.OK {
		return answer{}, &apiError{code: r.Error}
	}
	return r, nil
}
