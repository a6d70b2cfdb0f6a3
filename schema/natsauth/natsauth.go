// Package natsauth is the edge's NATS trust root. NATS runs in operator mode: an operator key
// signs two accounts (SPOOKAT, where every stream lives and every role connects, and SYS, the
// system account a cluster needs), and the SPOOKAT account key signs one user JWT per
// identity, carrying that role's permissions (schema.RolePermissions). A server, embedded or a
// cluster node, trusts the operator and nothing else, so it accepts no client without a JWT
// signed here, and a new worker's credentials need no change on any server.
//
// The keys live in <data>/nats-auth/ (directory 0700, files 0600): whoever can read that
// folder can mint credentials, as whoever can read the SQLite file can read every site's
// tokens. Every credential issued is recorded in issued.json so it can be listed and revoked;
// revocations live in the account JWT, which servers reload.
package natsauth

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"spookat/schema"
)

// DirName is the folder of the trust root inside the data directory.
const DirName = "nats-auth"

const (
	accountName = "SPOOKAT"
	systemName  = "SYS"
)

// Authority holds the operator and account keys and signs identities.
type Authority struct {
	dir      string
	operator nkeys.KeyPair
	opJWT    string
	account  nkeys.KeyPair
	accPub   string
	system   nkeys.KeyPair
	sysPub   string
	sysJWT   string

	mu     sync.Mutex
	accJWT string // re-signed when a credential is revoked
}

// Open loads the trust root of a data directory, creating it on first use.
func Open(dataDir string) (*Authority, error) {
	dir := filepath.Join(dataDir, DirName)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if err := os.Chmod(dir, 0o700); err != nil { // an older, looser folder
		return nil, err
	}
	a := &Authority{dir: dir}
	unlock, err := a.lock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	if a.operator, err = a.key("operator.nk", nkeys.CreateOperator); err != nil {
		return nil, err
	}
	if a.account, err = a.key("account.nk", nkeys.CreateAccount); err != nil {
		return nil, err
	}
	if a.system, err = a.key("system.nk", nkeys.CreateAccount); err != nil {
		return nil, err
	}
	a.accPub, _ = a.account.PublicKey()
	a.sysPub, _ = a.system.PublicKey()
	opPub, _ := a.operator.PublicKey()

	oc := jwt.NewOperatorClaims(opPub)
	oc.Name = "spookat"
	oc.SystemAccount = a.sysPub
	if a.opJWT, err = oc.Encode(a.operator); err != nil {
		return nil, err
	}
	sc := jwt.NewAccountClaims(a.sysPub)
	sc.Name = systemName
	if a.sysJWT, err = sc.Encode(a.operator); err != nil {
		return nil, err
	}
	// The account JWT is kept on disk: it carries the revocations.
	if b, err := os.ReadFile(filepath.Join(dir, "account.jwt")); err == nil {
		if _, err := jwt.DecodeAccountClaims(string(b)); err != nil {
			return nil, fmt.Errorf("%s/account.jwt: %w", dir, err)
		}
		a.accJWT = string(b)
	} else if errors.Is(err, os.ErrNotExist) {
		ac := jwt.NewAccountClaims(a.accPub)
		if err := a.signAccount(ac); err != nil {
			return nil, err
		}
	} else {
		return nil, err
	}
	return a, nil
}

// key reads a seed file, or creates it.
func (a *Authority) key(name string, create func() (nkeys.KeyPair, error)) (nkeys.KeyPair, error) {
	path := filepath.Join(a.dir, name)
	if b, err := os.ReadFile(path); err == nil {
		kp, err := nkeys.FromSeed([]byte(strings.TrimSpace(string(b))))
		if err != nil {
			return nil, fmt.Errorf("%s: not an nkey seed", path)
		}
		return kp, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	kp, err := create()
	if err != nil {
		return nil, err
	}
	seed, _ := kp.Seed()
	if err := writeFile(path, append(seed, '\n')); err != nil {
		return nil, err
	}
	return kp, nil
}

// signAccount signs the SPOOKAT account: JetStream without limits of its own (the server's
// and the streams' limits apply), revocations as given. Caller holds the lock file.
func (a *Authority) signAccount(ac *jwt.AccountClaims) error {
	ac.Name = accountName
	ac.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: -1, Streams: -1, Consumer: -1}
	s, err := ac.Encode(a.operator)
	if err != nil {
		return err
	}
	if err := writeFile(filepath.Join(a.dir, "account.jwt"), []byte(s)); err != nil {
		return err
	}
	a.mu.Lock()
	a.accJWT = s
	a.mu.Unlock()
	return nil
}

// lock takes the folder's lock file, so an edge and an `edge creds` command never write
// issued.json or account.jwt at the same time.
func (a *Authority) lock() (func(), error) {
	f, err := os.OpenFile(filepath.Join(a.dir, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() { f.Close() }, nil
}

func writeFile(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	if err := os.Chmod(tmp, 0o600); err != nil { // whatever the umask
		return err
	}
	return os.Rename(tmp, path)
}

// AccountJWT is the SPOOKAT account's current JWT (with its revocations).
func (a *Authority) AccountJWT() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.accJWT
}

// AccountPublicKey is the SPOOKAT account's public key (what `nats account info` shows).
func (a *Authority) AccountPublicKey() string { return a.accPub }

// Identity is a signed user: a role (and, for a worker, its id) with its key.
type Identity struct {
	Role     schema.Role
	WorkerID string // workers only
	Name     string // the JWT's name: "edge", "ops", "worker <id>"
	Key      string // the user's public key, what a revocation names
	JWT      string
	seed     []byte
}

// Issue signs a new identity with a fresh key. It is not recorded (see Record): the edge's
// own connections are issued at every start and die with the process.
func (a *Authority) Issue(role schema.Role, workerID string) (*Identity, error) {
	if !slices.Contains(schema.Roles, role) {
		return nil, fmt.Errorf("unknown role %q: want edge, worker or ops", role)
	}
	if role == schema.RoleWorker && workerID == "" {
		return nil, errors.New("a worker's credentials name its id (-id box1-1): it may publish only results.<id> and write only its own WORKERS key")
	}
	if role != schema.RoleWorker {
		workerID = ""
	}
	kp, err := nkeys.CreateUser()
	if err != nil {
		return nil, err
	}
	pub, _ := kp.PublicKey()
	seed, _ := kp.Seed()
	uc := jwt.NewUserClaims(pub)
	uc.Name = schema.IdentityName(role, workerID)
	perm := schema.RolePermissions(role, workerID)
	uc.Pub.Allow.Add(perm.Publish...)
	uc.Sub.Allow.Add(perm.Subscribe...)
	uc.IssuerAccount = "" // signed by the account key itself
	s, err := uc.Encode(a.account)
	if err != nil {
		return nil, err
	}
	return &Identity{Role: role, WorkerID: workerID, Name: uc.Name, Key: pub, JWT: s, seed: seed}, nil
}

// Creds is the identity as a NATS credentials file (nats.UserCredentials, nats --creds).
func (id *Identity) Creds() []byte {
	b, _ := jwt.FormatUserConfig(id.JWT, id.seed)
	return b
}

// Options are the connection options of the identity: its JWT and seed, and its inbox
// prefix (the only subjects it may subscribe to).
func (id *Identity) Options() []nats.Option {
	return []nats.Option{
		nats.UserJWTAndSeed(id.JWT, string(id.seed)),
		nats.CustomInboxPrefix(schema.InboxPrefix(id.Role, id.WorkerID)),
	}
}

// Record is a credential as issued.json keeps it.
type Record struct {
	Key       string      `json:"key"`
	Role      schema.Role `json:"role"`
	WorkerID  string      `json:"worker_id,omitempty"`
	IssuedAt  time.Time   `json:"issued_at"`
	RevokedAt *time.Time  `json:"revoked_at,omitempty"`
}

func (a *Authority) readIssued() ([]Record, error) {
	b, err := os.ReadFile(filepath.Join(a.dir, "issued.json"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var list []Record
	if err := json.Unmarshal(b, &list); err != nil {
		return nil, fmt.Errorf("%s/issued.json: %w", a.dir, err)
	}
	return list, nil
}

func (a *Authority) writeIssued(list []Record) error {
	b, _ := json.MarshalIndent(list, "", "  ")
	return writeFile(filepath.Join(a.dir, "issued.json"), append(b, '\n'))
}

// Record keeps an identity handed out as a file, so it can be listed and revoked.
func (a *Authority) Record(id *Identity) error {
	unlock, err := a.lock()
	if err != nil {
		return err
	}
	defer unlock()
	list, err := a.readIssued()
	if err != nil {
		return err
	}
	list = append(list, Record{Key: id.Key, Role: id.Role, WorkerID: id.WorkerID, IssuedAt: time.Now().UTC().Truncate(time.Second)})
	return a.writeIssued(list)
}

// Issued lists the recorded credentials, oldest first.
func (a *Authority) Issued() ([]Record, error) {
	unlock, err := a.lock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	return a.readIssued()
}

// Revoke revokes recorded credentials: the one with public key key, or with key empty every
// one issued to workerID. It re-signs the account JWT with the revocations and returns the
// records it revoked. A server applies it when it gets the new account JWT (the embedded one
// at once, a cluster at its next reload).
func (a *Authority) Revoke(key, workerID string) ([]Record, error) {
	if key == "" && workerID == "" {
		return nil, errors.New("name the credential to revoke: -key U… (see `edge creds list`) or -id <worker id>")
	}
	unlock, err := a.lock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	list, err := a.readIssued()
	if err != nil {
		return nil, err
	}
	ac, err := jwt.DecodeAccountClaims(a.AccountJWT())
	if err != nil {
		return nil, err
	}
	now := time.Now().UTC().Truncate(time.Second)
	var done []Record
	for i := range list {
		r := &list[i]
		if r.RevokedAt != nil || (key != "" && r.Key != key) || (key == "" && (r.Role != schema.RoleWorker || r.WorkerID != workerID)) {
			continue
		}
		// A revocation covers JWTs issued up to its time: one second later, so a JWT signed
		// within the current second is covered too.
		ac.RevokeAt(r.Key, now.Add(time.Second))
		r.RevokedAt = &now
		done = append(done, *r)
	}
	if len(done) == 0 {
		if key != "" {
			return nil, fmt.Errorf("no credential with key %s that is not revoked already (see `edge creds list`)", key)
		}
		return nil, fmt.Errorf("no credential of worker %q that is not revoked already (see `edge creds list`)", workerID)
	}
	if err := a.signAccount(ac); err != nil {
		return nil, err
	}
	return done, a.writeIssued(list)
}

// Trust is what a server needs to trust this authority: the operator, the system account,
// and every account's JWT by public key (for a memory resolver).
func (a *Authority) Trust() (operator *jwt.OperatorClaims, systemAccount string, accounts map[string]string, err error) {
	oc, err := jwt.DecodeOperatorClaims(a.opJWT)
	if err != nil {
		return nil, "", nil, err
	}
	return oc, a.sysPub, map[string]string{a.sysPub: a.sysJWT, a.accPub: a.AccountJWT()}, nil
}

// ServerConfig is the part of a nats-server configuration file that makes a cluster node
// trust this operator (include it from each node's file; see ops/nats/cluster.conf).
func (a *Authority) ServerConfig() string {
	var b strings.Builder
	b.WriteString("# Written by `edge nats-config`: trust spookat's operator. Every client needs a JWT signed\n")
	b.WriteString("# by its account (`edge creds …`). Rewrite this file and reload every node\n")
	b.WriteString("# (nats-server --signal reload) after `edge creds revoke`.\n")
	fmt.Fprintf(&b, "operator: %s\n", a.opJWT)
	fmt.Fprintf(&b, "system_account: %s\n", a.sysPub)
	b.WriteString("resolver: MEMORY\n")
	b.WriteString("resolver_preload: {\n")
	fmt.Fprintf(&b, "  # %s\n  %s: %s\n", systemName, a.sysPub, a.sysJWT)
	fmt.Fprintf(&b, "  # %s\n  %s: %s\n", accountName, a.accPub, a.AccountJWT())
	b.WriteString("}\n")
	return b.String()
}
