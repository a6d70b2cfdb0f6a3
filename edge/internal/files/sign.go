package files

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"spookat/schema"
)

// LinkTTL is how long a signed link works: long enough for an operator to open it from a
// Slack thread the next morning, short enough that a link pasted elsewhere dies.
const LinkTTL = 7 * 24 * time.Hour

// VisitorLinkTTL is how long the link in a visitor's frame works: the window shows the
// image when the frame comes and gets a new link with the history at its next start.
const VisitorLinkTTL = 24 * time.Hour

// KeyFile is the signing key's file in the data directory (32 random bytes, 0600).
const KeyFile = "files.key"

// Signer signs and checks the links of files that are read without a login.
type Signer struct{ key []byte }

// OpenSigner reads the data directory's signing key, creating it on the first start.
// Removing the file revokes every link given out.
func OpenSigner(dataDir string) (*Signer, error) {
	p := filepath.Join(dataDir, KeyFile)
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		b = make([]byte, 32)
		rand.Read(b)
		if err := schema.WriteSecret(p, b); err != nil {
			return nil, err
		}
		return &Signer{key: b}, nil
	}
	if err != nil {
		return nil, err
	}
	if len(b) < 32 {
		return nil, errors.New(p + " is damaged (shorter than 32 bytes): restore it from a backup (ops/RUNBOOK.md, Durability), " +
			"or remove it to make a new one (the attachment links given out stop working)")
	}
	return &Signer{key: b}, nil
}

// NewSigner signs with key (tests).
func NewSigner(key []byte) *Signer { return &Signer{key: key} }

func (s *Signer) mac(fileKey string, exp int64) string {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(fileKey))
	m.Write([]byte{0})
	m.Write(strconv.AppendInt(nil, exp, 10))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// Link is base/v1/files/<key>?exp=<unix seconds>&sig=<HMAC-SHA256>, valid until exp.
func (s *Signer) Link(base, fileKey string, exp time.Time) string {
	e := exp.Unix()
	return base + "/v1/files/" + fileKey + "?exp=" + strconv.FormatInt(e, 10) + "&sig=" + url.QueryEscape(s.mac(fileKey, e))
}

// Check reports whether exp and sig sign fileKey and exp is after now.
func (s *Signer) Check(fileKey, exp, sig string, now time.Time) bool {
	e, err := strconv.ParseInt(exp, 10, 64)
	if err != nil || now.Unix() >= e {
		return false
	}
	return hmac.Equal([]byte(sig), []byte(s.mac(fileKey, e)))
}

// ForVisitor is f with a link for the visitor's window (relative to the edge: the window
// adds its base), nil for nil; a nil Signer gives no link.
func (s *Signer) ForVisitor(f *schema.File, now time.Time) *schema.File {
	if f == nil {
		return nil
	}
	c := *f
	if s != nil {
		c.URL = s.Link("", f.ID, now.Add(VisitorLinkTTL))
	}
	return &c
}
