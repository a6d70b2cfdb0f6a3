// Package natsauth is the edge's NATS trust root. NATS runs in operator mode: an operator key
// signs three accounts, and each account key signs the user JWTs of its identities, carrying
// that role's permissions (schema.RolePermissions):
//
//   - SPOOKAT: every stream lives here; the edge and the workers connect to it.
//   - OPS: the SRE's read-only identity, alone, reaching SPOOKAT's read API through service
//     imports (schema.OpsImports), so the replies it asks for never land where a stream
//     could store them.
//   - SYS: the system account a cluster needs; no identity of ours.
//
// A server, embedded or a cluster node, trusts the operator and nothing else, so it accepts no
// client without a JWT signed here, and a new worker's credentials need no change on any server.
//
// The keys live in <data>/nats-auth/ (directory 0700, files 0600): whoever can read that
// folder can mint credentials, as whoever can read the SQLite file can read every site's
// tokens. Every credential issued is recorded in issued.json so it can be listed and revoked;
// revocations live in the account JWTs, which servers reload.
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

// account is one account of the operator: its key and its current JWT.
type account struct {
	name    string
	keyFile string
	jwtFile string // "" for an account whose JWT carries nothing to keep (SYS)
	kp      nkeys.KeyPair
	pub     string
	jwt     string
}

// Authority holds the operator and account keys and signs identities.
type Authority struct {
	dir      string
	operator nkeys.KeyPair
	opJWT    string

	mu       sync.Mutex // guards the accounts' jwt
	spookat  *account
	ops      *account
	system   *account
	accounts []*account
}

// Open loads the trust root of a data directory, creating it on first use. Account JWTs are
// signed again on every open, with today's exports and imports and every revocation recorded
// (in the old JWT or in issued.json), so an upgrade or a lost JWT file cannot undo one.
func Open(dataDir string) (*Authority, error) {
	dir := filepath.Join(dataDir, DirName)
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
		if err := schema.SyncDir(dataDir); err != nil {
			return nil, err
		}
	}
	if err := os.Chmod(dir, 0o700); err != nil { // an older, looser folder
		return nil, err
	}
	a := &Authority{dir: dir,
		spookat: &account{name: "SPOOKAT", keyFile: "account.nk", jwtFile: "account.jwt"},
		ops:     &account{name: "OPS", keyFile: "ops.nk", jwtFile: "ops.jwt"},
		system:  &account{name: "SYS", keyFile: "system.nk"},
	}
	a.accounts = []*account{a.system, a.spookat, a.ops}
	unlock, err := a.lock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	if a.operator, err = a.key("operator.nk", nkeys.CreateOperator); err != nil {
		return nil, err
	}
	for _, acc := range a.accounts {
		if acc.kp, err = a.key(acc.keyFile, nkeys.CreateAccount); err != nil {
			return nil, err
		}
		acc.pub, _ = acc.kp.PublicKey()
	}
	opPub, _ := a.operator.PublicKey()
	oc := jwt.NewOperatorClaims(opPub)
	oc.Name = "spookat"
	oc.SystemAccount = a.system.pub
	if a.opJWT, err = oc.Encode(a.operator); err != nil {
		return nil, err
	}
	issued, err := a.readIssued()
	if err != nil {
		return nil, err
	}
	for _, acc := range a.accounts {
		revoked := map[string]int64{}
		if acc.jwtFile != "" {
			if b, err := os.ReadFile(filepath.Join(dir, acc.jwtFile)); err == nil {
				old, err := jwt.DecodeAccountClaims(string(b))
				if err != nil {
					return nil, damaged(filepath.Join(dir, acc.jwtFile), err.Error())
				}
				for k, at := range old.Revocations {
					revoked[k] = at
				}
			} else if !errors.Is(err, os.ErrNotExist) {
				return nil, err
			}
		}
		for _, r := range issued {
			if r.RevokedAt != nil && a.accountOf(r.Role) == acc {
				revoked[r.Key] = max(revoked[r.Key], r.RevokedAt.Add(time.Second).Unix())
			}
		}
		if err := a.sign(acc, revoked); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// accountOf is the account a role's identities live in.
func (a *Authority) accountOf(role schema.Role) *account {
	if role == schema.RoleOps {
		return a.ops
	}
	return a.spookat
}

// key reads a seed file, or creates it.
func (a *Authority) key(name string, create func() (nkeys.KeyPair, error)) (nkeys.KeyPair, error) {
	path := filepath.Join(a.dir, name)
	if b, err := os.ReadFile(path); err == nil {
		kp, err := nkeys.FromSeed([]byte(strings.TrimSpace(string(b))))
		if err != nil {
			return nil, damaged(path, "not an nkey seed")
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
	if err := schema.WriteSecret(path, append(seed, '\n')); err != nil {
		return nil, err
	}
	return kp, nil
}

// sign signs an account's JWT with the given revocations (user key → Unix time) and keeps it.
// SPOOKAT has JetStream without limits of its own (the server's and the streams' apply) and
// exports what OPS imports; OPS imports it under schema.OpsAPIPrefix. Caller holds the lock.
func (a *Authority) sign(acc *account, revoked map[string]int64) error {
	ac := jwt.NewAccountClaims(acc.pub)
	ac.Name = acc.name
	switch acc {
	case a.spookat:
		ac.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: -1, Streams: -1, Consumer: -1}
		for _, sub := range schema.OpsImports() {
			e := &jwt.Export{Name: sub, Subject: jwt.Subject(sub), Type: jwt.Service}
			if schema.OpsImportIsStream(sub) {
				e.ResponseType = jwt.ResponseTypeStream
			}
			ac.Exports.Add(e)
		}
	case a.ops:
		for _, sub := range schema.OpsImports() {
			ac.Imports.Add(&jwt.Import{Name: sub, Account: a.spookat.pub, Subject: jwt.Subject(sub),
				LocalSubject: jwt.RenamingSubject(schema.OpsLocal(sub)), Type: jwt.Service})
		}
	}
	for k, at := range revoked {
		ac.RevokeAt(k, time.Unix(at, 0))
	}
	s, err := ac.Encode(a.operator)
	if err != nil {
		return err
	}
	if acc.jwtFile != "" {
		if err := schema.WriteSecret(filepath.Join(a.dir, acc.jwtFile), []byte(s)); err != nil {
			return err
		}
	}
	a.mu.Lock()
	acc.jwt = s
	a.mu.Unlock()
	return nil
}

// damaged says how to recover from a file of the authority that cannot be read (empty after
// a power cut that an older edge, which wrote it without a sync, did not survive).
func damaged(path, what string) error {
	return fmt.Errorf("%s is damaged (%s). If no worker, NATS server or `edge creds` output was ever given credentials "+
		"from this data directory, stop the edge, remove %s and start again: a new authority is made. Otherwise restore "+
		"that folder from a backup (ops/RUNBOOK.md, Durability): the credentials given out are signed by it",
		path, what, filepath.Dir(path))
}

// lock takes the folder's lock file, so an edge and an `edge creds` command never write
// issued.json or an account JWT at the same time.
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

func (a *Authority) jwtOf(acc *account) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return acc.jwt
}

// AccountJWT is the SPOOKAT account's current JWT (with its revocations).
func (a *Authority) AccountJWT() string { return a.jwtOf(a.spookat) }

// AccountPublicKey is the SPOOKAT account's public key: the issuer of every edge and worker
// identity, and the key SITES values are signed with.
func (a *Authority) AccountPublicKey() string { return a.spookat.pub }

// SignSite signs a SITES value (see schema.SignSite) with the SPOOKAT account key, which only
// the edge's data directory holds; workers check it against their credentials' issuer.
func (a *Authority) SignSite(key string, payload []byte) []byte {
	return schema.SignSite(key, payload, a.spookat.kp)
}

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
	return a.IssueUntil(role, workerID, time.Time{})
}

// IssueUntil is Issue with an expiry (zero: none): for a human's one-off use of the edge's
// identity, say.
func (a *Authority) IssueUntil(role schema.Role, workerID string, expires time.Time) (*Identity, error) {
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
	if !expires.IsZero() {
		uc.Expires = expires.Unix()
	}
	perm := schema.RolePermissions(role, workerID)
	uc.Pub.Allow.Add(perm.Publish...)
	uc.Sub.Allow.Add(perm.Subscribe...)
	uc.Pub.Deny.Add(perm.DenyPublish...)
	uc.IssuerAccount = "" // signed by the account key itself
	s, err := uc.Encode(a.accountOf(role).kp)
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
		return nil, fmt.Errorf("%s/issued.json is damaged (%v): restore it from a backup (ops/RUNBOOK.md, Durability); "+
			"it records the credentials given out and their revocations, which a new one would forget", a.dir, err)
	}
	return list, nil
}

func (a *Authority) writeIssued(list []Record) error {
	b, _ := json.MarshalIndent(list, "", "  ")
	return schema.WriteSecret(filepath.Join(a.dir, "issued.json"), append(b, '\n'))
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
// one issued to workerID (or to an id that is the same subject token: they share their
// permissions). It signs the account JWTs again with the revocations and returns the records
// it revoked. A server applies it when it gets the new account JWTs (the embedded one at once,
// a cluster at its next reload).
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
	now := time.Now().UTC().Truncate(time.Second)
	var done []Record
	for i := range list {
		r := &list[i]
		if r.RevokedAt != nil || (key != "" && r.Key != key) ||
			(key == "" && (r.Role != schema.RoleWorker || schema.Token(r.WorkerID) != schema.Token(workerID))) {
			continue
		}
		r.RevokedAt = &now
		done = append(done, *r)
	}
	if len(done) == 0 {
		if key != "" {
			return nil, fmt.Errorf("no credential with key %s that is not revoked already (see `edge creds list`)", key)
		}
		return nil, fmt.Errorf("no credential of worker %q that is not revoked already (see `edge creds list`)", workerID)
	}
	if err := a.writeIssued(list); err != nil {
		return nil, err
	}
	for _, acc := range []*account{a.spookat, a.ops} {
		old, err := jwt.DecodeAccountClaims(a.jwtOf(acc))
		if err != nil {
			return nil, err
		}
		revoked := map[string]int64{}
		for k, at := range old.Revocations {
			revoked[k] = at
		}
		for _, r := range done {
			if a.accountOf(r.Role) == acc {
				// A revocation covers JWTs issued up to its time: one second later, so a JWT
				// signed within the current second is covered too.
				revoked[r.Key] = now.Add(time.Second).Unix()
			}
		}
		if err := a.sign(acc, revoked); err != nil {
			return nil, err
		}
	}
	return done, nil
}

// Trust is what a server needs to trust this authority: the operator, the system account,
// and every account's JWT by public key (for a memory resolver).
func (a *Authority) Trust() (operator *jwt.OperatorClaims, systemAccount string, accounts map[string]string, err error) {
	oc, err := jwt.DecodeOperatorClaims(a.opJWT)
	if err != nil {
		return nil, "", nil, err
	}
	accounts = map[string]string{}
	for _, acc := range a.accounts {
		accounts[acc.pub] = a.jwtOf(acc)
	}
	return oc, a.system.pub, accounts, nil
}

// ServerConfig is the part of a nats-server configuration file that makes a cluster node
// trust this operator (include it from each node's file; see ops/nats/cluster.conf).
func (a *Authority) ServerConfig() string {
	var b strings.Builder
	b.WriteString("# Written by `edge nats-config`: trust spookat's operator. Every client needs a JWT signed\n")
	b.WriteString("# by one of its accounts (`edge creds …`). Rewrite this file and reload every node\n")
	b.WriteString("# (nats-server --signal reload) after `edge creds revoke`.\n")
	fmt.Fprintf(&b, "operator: %s\n", a.opJWT)
	fmt.Fprintf(&b, "system_account: %s\n", a.system.pub)
	b.WriteString("resolver: MEMORY\n")
	b.WriteString("resolver_preload: {\n")
	for _, acc := range a.accounts {
		fmt.Fprintf(&b, "  # %s\n  %s: %s\n", acc.name, acc.pub, a.jwtOf(acc))
	}
	b.WriteString("}\n")
	return b.String()
}
