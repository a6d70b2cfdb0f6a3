package widget

import (
	"strings"
	"testing"
)

func TestVerifyUserHash(t *testing.T) {
	const secret = "s3cret-of-the-site-0123456789"
	good := UserHash(secret, "user-42")
	for _, c := range []struct {
		name, secret, user, hash string
		ok                       bool
	}{
		{"valid", secret, "user-42", good, true},
		{"upper-case hex", secret, "user-42", strings.ToUpper(good), true},
		{"another user", secret, "user-43", good, false},
		{"another secret", secret + "x", "user-42", good, false},
		{"one digit off", secret, "user-42", good[:63] + string("0123456789abcdef"[(strings.IndexByte("0123456789abcdef", good[63])+1)%16]), false},
		{"short", secret, "user-42", good[:62], false},
		{"not hex", secret, "user-42", strings.Repeat("zz", 32), false},
		{"no secret", "", "user-42", UserHash("", "user-42"), false},
		{"empty", secret, "user-42", "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := VerifyUserHash(c.secret, c.user, c.hash); got != c.ok {
				t.Fatalf("VerifyUserHash = %v, want %v", got, c.ok)
			}
		})
	}
	// The documented recipe: hex HMAC-SHA256(secret, user_id), e.g. in a shell:
	// printf %s user-42 | openssl dgst -sha256 -hmac "$SECRET"
	if len(good) != 64 {
		t.Fatalf("user_hash is %d hex digits, want 64", len(good))
	}
}
