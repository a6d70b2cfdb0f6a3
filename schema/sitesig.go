package schema

import (
	"bytes"
	"encoding/base64"
	"errors"

	"github.com/nats-io/nkeys"
)

// A SITES value is signed by the edge with its account key: "<signature>.<JSON>", the
// signature (Ed25519, base64url) over the key and the JSON. Workers take a value only when the
// signature checks against the account that issued their own credentials. So a value written
// into the bucket by anyone but the edge (NATS checks the subject a client publishes to, not
// the reply subject it names, and JetStream answers into that reply: see access.go) is
// ignored, and a value cannot be moved to another site's key. SiteDelivery.Signed orders
// values, so an old one written back is ignored too.

// ErrSiteSignature is a SITES value the edge did not sign for that key.
var ErrSiteSignature = errors.New("SITES value not signed by the edge for this key")

func siteSigned(key string, payload []byte) []byte {
	return append(append([]byte(key), '\n'), payload...)
}

// SignSite makes a SITES value of payload for key.
func SignSite(key string, payload []byte, kp nkeys.KeyPair) []byte {
	sig, err := kp.Sign(siteSigned(key, payload))
	if err != nil { // only a key without a seed fails, and the edge's has one
		panic(err)
	}
	out := make([]byte, 0, base64.RawURLEncoding.EncodedLen(len(sig))+1+len(payload))
	out = base64.RawURLEncoding.AppendEncode(out, sig)
	return append(append(out, '.'), payload...)
}

// OpenSite checks a SITES value for key against the account public key that signs them and
// returns its JSON.
func OpenSite(key string, value []byte, accountPub string) ([]byte, error) {
	dot := bytes.IndexByte(value, '.')
	if dot < 0 {
		return nil, ErrSiteSignature
	}
	sig, err := base64.RawURLEncoding.DecodeString(string(value[:dot]))
	if err != nil {
		return nil, ErrSiteSignature
	}
	pk, err := nkeys.FromPublicKey(accountPub)
	if err != nil {
		return nil, err
	}
	payload := value[dot+1:]
	if pk.Verify(siteSigned(key, payload), sig) != nil {
		return nil, ErrSiteSignature
	}
	return payload, nil
}
