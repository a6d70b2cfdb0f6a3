package widget

import (
	"time"

	"spookat/edge/internal/brakes"
)

// Attachments come only from a visitor whose chat window is connected: its token is one a
// live socket of the site holds (a made-up token, or a site key alone, uploads nothing), and
// each such visitor has a brake of its own beside the (site, IP) one.
const (
	visitorUploadRate  = 0.2 // attachments a second per visitor, sustained
	visitorUploadBurst = 5
)

// uploader is a visitor whose window is connected, by its token's hash.
type uploader struct {
	site  int64
	n     int           // its sockets (tabs)
	brake brakes.Bucket // under Handler.mu
}

// connected records (on) or forgets one socket of a visitor's token.
func (h *Handler) connected(siteID int64, tokenHash []byte, on bool) {
	var k [32]byte
	copy(k[:], tokenHash)
	h.mu.Lock()
	defer h.mu.Unlock()
	u := h.uploaders[k]
	switch {
	case on && u == nil:
		if h.uploaders == nil {
			h.uploaders = make(map[[32]byte]*uploader)
		}
		h.uploaders[k] = &uploader{site: siteID, n: 1, brake: brakes.NewBucket(visitorUploadRate, visitorUploadBurst)}
	case on:
		u.n++
	case u != nil:
		if u.n--; u.n <= 0 {
			delete(h.uploaders, k)
		}
	}
}

// admitUpload says whether the token is a connected visitor's of the site (known), and
// whether its brake lets one more attachment through now (else how long to wait).
func (h *Handler) admitUpload(siteID int64, tokenHash [32]byte, now time.Time) (known, ok bool, wait time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	u := h.uploaders[tokenHash]
	if u == nil || u.site != siteID {
		return false, false, 0
	}
	ok, wait = u.brake.Take(now.UnixNano())
	return true, ok, wait
}
