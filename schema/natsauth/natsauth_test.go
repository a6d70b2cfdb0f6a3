package natsauth

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/nats-io/jwt/v2"

	"spookat/schema"
	"spookat/schema/testkit"
)

// The trust root is owner-only whatever the umask, survives a reopen with the same keys, and
// keeps its revocations; an identity carries exactly its role's permissions.
func TestAuthorityFilesAndReopen(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	dir := t.TempDir()
	a, err := Open(dir)
	testkit.NoErr(t, err)
	id, err := a.Issue(schema.RoleWorker, "box1.example.com-1")
	testkit.NoErr(t, err)
	testkit.NoErr(t, a.Record(id))
	if _, err := a.Revoke(id.Key, ""); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(filepath.Join(dir, DirName))
	testkit.NoErr(t, err)
	if st, _ := os.Stat(filepath.Join(dir, DirName)); st.Mode().Perm() != 0o700 {
		t.Errorf("%s is %o, want 700", DirName, st.Mode().Perm())
	}
	for _, e := range entries {
		if info, _ := e.Info(); info.Mode().Perm() != 0o600 {
			t.Errorf("%s is %o, want 600", e.Name(), info.Mode().Perm())
		}
	}

	b, err := Open(dir)
	testkit.NoErr(t, err)
	if b.AccountPublicKey() != a.AccountPublicKey() {
		t.Fatal("reopened with another account key")
	}
	ac, err := jwt.DecodeAccountClaims(b.AccountJWT())
	testkit.NoErr(t, err)
	if !ac.IsClaimRevoked(mustUser(t, id.JWT)) {
		t.Fatal("the revocation did not survive a reopen")
	}
	// A lost account JWT does not undo a revocation: issued.json still has it.
	testkit.NoErr(t, os.Remove(filepath.Join(dir, DirName, "account.jwt")))
	c, err := Open(dir)
	testkit.NoErr(t, err)
	if ac, err := jwt.DecodeAccountClaims(c.AccountJWT()); err != nil || !ac.IsClaimRevoked(mustUser(t, id.JWT)) {
		t.Fatalf("after losing account.jwt the revocation is gone (%v)", err)
	}
	if !strings.Contains(b.ServerConfig(), "resolver_preload") || !strings.Contains(b.ServerConfig(), b.AccountJWT()) {
		t.Fatal("server config without the current account JWT")
	}

	uc := mustUser(t, id.JWT)
	if uc.Name != "worker box1.example.com-1" {
		t.Fatalf("name %q", uc.Name)
	}
	want := schema.RolePermissions(schema.RoleWorker, "box1.example.com-1")
	if strings.Join(uc.Pub.Allow, " ") != strings.Join(want.Publish, " ") || strings.Join(uc.Sub.Allow, " ") != strings.Join(want.Subscribe, " ") {
		t.Fatalf("permissions %+v, want %+v", uc.Permissions, want)
	}
	if _, err := a.Issue(schema.RoleWorker, ""); err == nil {
		t.Fatal("a worker identity without an id")
	}
	if _, err := a.Issue("admin", ""); err == nil {
		t.Fatal("an unknown role")
	}
}

func mustUser(t *testing.T, token string) *jwt.UserClaims {
	t.Helper()
	uc, err := jwt.DecodeUserClaims(token)
	testkit.NoErr(t, err)
	return uc
}
