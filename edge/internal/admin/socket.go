package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"spookat/edge/internal/store"
)

// Listen opens dataDir/admin.sock. The socket file is readable by its owner only: reaching
// it is the authorisation. Call it holding the data directory's lock.
func Listen(dataDir string) (net.Listener, error) {
	path := filepath.Join(dataDir, SocketName)
	_ = os.Remove(path) // a stale socket of a killed edge; the data dir lock is ours
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}

// Serve answers admin requests on ln until ctx is done.
func Serve(ctx context.Context, ln net.Listener, api API) error {
	mux := http.NewServeMux()
	handle(mux, "POST /sites", func(ctx context.Context, s *store.Site) (any, error) { return api.AddSite(ctx, s) })
	handle(mux, "GET /sites", func(ctx context.Context, _ *struct{}) (any, error) { return api.ListSites(ctx) })
	handle(mux, "POST /operators", func(ctx context.Context, r *OperatorRequest) (any, error) { return api.AddOperator(ctx, *r) })
	handle(mux, "POST /seed", func(ctx context.Context, r *SeedRequest) (any, error) { return api.Seed(ctx, *r) })
	handle(mux, "POST /creds/revoke", func(ctx context.Context, r *RevokeRequest) (any, error) { return api.RevokeCreds(ctx, *r) })
	handle(mux, "GET /operators", func(ctx context.Context, _ *struct{}) (any, error) { return api.ListOperators(ctx) })
	handle(mux, "POST /operators/password", func(ctx context.Context, r *PasswordRequest) (any, error) { return api.SetPassword(ctx, *r) })
	handle(mux, "POST /operators/remove", func(ctx context.Context, r *OperatorRef) (any, error) { return api.RemoveOperator(ctx, *r) })
	handle(mux, "POST /members", func(ctx context.Context, r *MemberRequest) (any, error) { return api.AddMember(ctx, *r) })
	handle(mux, "POST /members/remove", func(ctx context.Context, r *MemberRequest) (any, error) { return api.RemoveMember(ctx, *r) })
	handle(mux, "POST /sites/retention", func(ctx context.Context, r *RetentionRequest) (any, error) { return api.SetRetention(ctx, *r) })
	handle(mux, "POST /people/export", func(ctx context.Context, r *PersonRequest) (any, error) { return api.ExportPerson(ctx, *r) })
	handle(mux, "POST /people/erase", func(ctx context.Context, r *PersonRequest) (any, error) { return api.ErasePerson(ctx, *r) })
	handle(mux, "POST /audit", func(ctx context.Context, e *store.AuditEntry) (any, error) { return struct{}{}, api.Audit(ctx, *e) })
	handle(mux, "POST /audit/list", func(ctx context.Context, r *AuditRequest) (any, error) { return api.AuditLog(ctx, *r) })
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

type apiError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func handle[T any](mux *http.ServeMux, pattern string, fn func(context.Context, *T) (any, error)) {
	mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		req := new(T)
		if r.Method == http.MethodPost {
			if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(req); err != nil {
				w.WriteHeader(http.StatusBadRequest)
				json.NewEncoder(w).Encode(apiError{"invalid", "The request body is not valid JSON: " + err.Error()})
				return
			}
		}
		out, err := fn(r.Context(), req)
		if err != nil {
			w.WriteHeader(http.StatusUnprocessableEntity)
			json.NewEncoder(w).Encode(apiError{"failed", err.Error()})
			return
		}
		json.NewEncoder(w).Encode(out)
	})
}

// Client sends admin operations to the edge running on a data directory.
type Client struct {
	http *http.Client
}

// NewClient dials dataDir/admin.sock for every request.
func NewClient(dataDir string) *Client {
	path := filepath.Join(dataDir, SocketName)
	return &Client{http: &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		}},
	}}
}

func call[T any](ctx context.Context, c *Client, method, path string, body any) (*T, error) {
	var rd *bytes.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	} else {
		rd = bytes.NewReader(nil)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://edge"+path, rd)
	if err != nil {
		return nil, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("the edge holds the data directory but its admin socket does not answer: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var e apiError
		if json.NewDecoder(resp.Body).Decode(&e) == nil && e.Message != "" {
			return nil, errors.New(e.Message)
		}
		return nil, fmt.Errorf("admin socket: %s", resp.Status)
	}
	out := new(T)
	return out, json.NewDecoder(resp.Body).Decode(out)
}

// AddSite implements API.
func (c *Client) AddSite(ctx context.Context, s *store.Site) (*store.Site, error) {
	return call[store.Site](ctx, c, http.MethodPost, "/sites", s)
}

// SetRetention implements API.
func (c *Client) SetRetention(ctx context.Context, req RetentionRequest) (*SiteInfo, error) {
	return call[SiteInfo](ctx, c, http.MethodPost, "/sites/retention", req)
}

// ExportPerson implements API.
func (c *Client) ExportPerson(ctx context.Context, req PersonRequest) (*store.PersonExport, error) {
	return call[store.PersonExport](ctx, c, http.MethodPost, "/people/export", req)
}

// ErasePerson implements API.
func (c *Client) ErasePerson(ctx context.Context, req PersonRequest) (*ErasedPerson, error) {
	return call[ErasedPerson](ctx, c, http.MethodPost, "/people/erase", req)
}

// Audit implements API.
func (c *Client) Audit(ctx context.Context, e store.AuditEntry) error {
	_, err := call[struct{}](ctx, c, http.MethodPost, "/audit", e)
	return err
}

// AuditLog implements API.
func (c *Client) AuditLog(ctx context.Context, req AuditRequest) ([]store.AuditEntry, error) {
	out, err := call[[]store.AuditEntry](ctx, c, http.MethodPost, "/audit/list", req)
	if err != nil {
		return nil, err
	}
	return *out, nil
}

// ListSites implements API.
func (c *Client) ListSites(ctx context.Context) ([]SiteInfo, error) {
	out, err := call[[]SiteInfo](ctx, c, http.MethodGet, "/sites", nil)
	if err != nil {
		return nil, err
	}
	return *out, nil
}

// AddOperator implements API.
func (c *Client) AddOperator(ctx context.Context, req OperatorRequest) (*store.Operator, error) {
	return call[store.Operator](ctx, c, http.MethodPost, "/operators", req)
}

// Seed implements API.
func (c *Client) Seed(ctx context.Context, req SeedRequest) (*SeedResult, error) {
	return call[SeedResult](ctx, c, http.MethodPost, "/seed", req)
}
