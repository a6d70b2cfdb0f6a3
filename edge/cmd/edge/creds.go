package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"spookat/edge/internal/admin"
	"spookat/edge/internal/store"
	"spookat/schema"
	"spookat/schema/natsauth"
)

func credsIssue(role schema.Role, args []string) error {
	fs := flag.NewFlagSet("edge creds "+string(role), flag.ContinueOnError)
	dataDir := fs.String("data", "data", "data directory (its nats-auth/ folder signs the credentials)")
	out := fs.String("out", "", "write the credentials file here (owner-only; - for standard output)")
	expires := fs.Duration("expires", 0, "the credentials stop working after this long (e.g. 1h for a one-off command; 0: never)")
	id := ""
	if role == schema.RoleWorker {
		fs.StringVar(&id, "id", "", "the worker's id (its WORKERS key and results.<id>), e.g. box1-1")
	}
	if err := parse(fs, args); err != nil {
		return err
	}
	if *out == "" {
		return fmt.Errorf("edge creds %s: -out FILE is required (the file holds a secret key: keep it owner-only)", role)
	}
	if role == schema.RoleWorker && id == "" {
		return errors.New("edge creds worker: -id is required, e.g. -id box1-1 (a worker may publish only its own results and heartbeat)")
	}
	var until time.Time
	if *expires > 0 {
		until = time.Now().Add(*expires)
	}
	ident, err := issue(*dataDir, role, id, *out, until)
	if err != nil {
		return err
	}
	if *out != "-" {
		fmt.Fprintf(os.Stderr, "%s credentials written to %s (key %s)\n", ident.Name, *out, ident.Key)
	}
	return nil
}

// issue signs an identity with the data directory's authority, records it (first: a
// credential that exists can always be revoked), writes it in the audit log and then its
// credentials file (owner-only; "-" for standard output).
func issue(dataDir string, role schema.Role, id, out string, until time.Time) (*natsauth.Identity, error) {
	if err := needAuthority(dataDir); err != nil {
		return nil, err
	}
	auth, err := natsauth.Open(dataDir)
	if err != nil {
		return nil, err
	}
	ident, err := auth.IssueUntil(role, id, until)
	if err != nil {
		return nil, err
	}
	if err := auth.Record(ident); err != nil {
		return nil, err
	}
	if err := auditIssued(dataDir, ident, until); err != nil {
		return nil, fmt.Errorf("%s credentials %s signed but not written: the audit log refused them (%w); revoke with edge creds revoke -key %s", ident.Name, ident.Key, err, ident.Key)
	}
	if out == "-" {
		_, err = os.Stdout.Write(ident.Creds())
		return ident, err
	}
	return ident, schema.WriteSecret(out, ident.Creds())
}

// auditIssued records an issued credential in the audit log. A data directory with no
// database yet (a cluster node before its edge first starts) has no log: the authority's
// record (edge creds list) is the only trace then.
func auditIssued(dataDir string, ident *natsauth.Identity, until time.Time) error {
	if needData(dataDir) != nil {
		return nil
	}
	d := map[string]any{"key": ident.Key, "role": ident.Role}
	if ident.WorkerID != "" {
		d["worker_id"] = ident.WorkerID
	}
	if !until.IsZero() {
		d["expires"] = until.UTC().Format(time.RFC3339)
	}
	return withAPI(dataDir, func(ctx context.Context, api admin.API) error {
		return api.Audit(ctx, store.AuditEntry{Action: store.AuditCredsIssued, Detail: d})
	})
}

func credsList(args []string) error {
	fs := flag.NewFlagSet("edge creds list", flag.ContinueOnError)
	dataDir := fs.String("data", "data", "data directory")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := needAuthority(*dataDir); err != nil {
		return err
	}
	auth, err := natsauth.Open(*dataDir)
	if err != nil {
		return err
	}
	list, err := auth.Issued()
	if err != nil {
		return err
	}
	if *asJSON {
		if list == nil {
			list = []natsauth.Record{}
		}
		return printJSON(list)
	}
	tw := tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tROLE\tWORKER\tISSUED\tREVOKED")
	for _, r := range list {
		revoked := ""
		if r.RevokedAt != nil {
			revoked = r.RevokedAt.Format("2006-01-02 15:04:05Z")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Key, r.Role, r.WorkerID, r.IssuedAt.Format("2006-01-02 15:04:05Z"), revoked)
	}
	return tw.Flush()
}

func credsRevoke(args []string) error {
	fs := flag.NewFlagSet("edge creds revoke", flag.ContinueOnError)
	dataDir := fs.String("data", "data", "data directory")
	req := admin.RevokeRequest{}
	fs.StringVar(&req.Key, "key", "", "public key of the credential (U…, from edge creds list)")
	fs.StringVar(&req.WorkerID, "id", "", "revoke every credential issued to this worker id")
	if err := parse(fs, args); err != nil {
		return err
	}
	if (req.Key == "") == (req.WorkerID == "") {
		return errors.New("edge creds revoke: give exactly one of -key U… (see `edge creds list`) or -id <worker id>")
	}
	return withAPI(*dataDir, func(ctx context.Context, api admin.API) error {
		res, err := api.RevokeCreds(ctx, req)
		if err != nil {
			return err
		}
		for _, r := range res.Revoked {
			name := string(r.Role)
			if r.WorkerID != "" {
				name += " " + r.WorkerID
			}
			fmt.Printf("revoked %s (%s, issued %s)\n", r.Key, name, r.IssuedAt.Format("2006-01-02 15:04:05Z"))
		}
		switch {
		case res.Applied:
			fmt.Println("the running edge's NATS server applied it: those connections are closed and cannot come back")
		case res.External:
			fmt.Println("this edge uses an external NATS: write its auth again and reload every node:\n" +
				"  edge nats-config -data " + *dataDir + " -out auth.conf   # copy to each node\n" +
				"  nats-server --signal reload=<pid>                      # on each node")
		default:
			fmt.Println("no edge is running: its embedded NATS applies it at the next start")
		}
		return nil
	})
}

// needAuthority refuses a data directory with neither a database nor a NATS authority:
// credentials signed by a new authority would be trusted by no edge. (nats-config, which a
// cluster needs before its edge first starts, is the one command that may create it.)
func needAuthority(dataDir string) error {
	if _, err := os.Stat(filepath.Join(dataDir, natsauth.DirName)); err == nil {
		return nil
	}
	return needData(dataDir)
}

// natsConfig writes the part of a nats-server configuration that trusts this edge's
// operator, for a cluster (ops/nats/cluster.conf includes it).
func natsConfig(args []string) error {
	fs := flag.NewFlagSet("edge nats-config", flag.ContinueOnError)
	dataDir := fs.String("data", "data", "data directory (created with its nats-auth/ folder if new)")
	out := fs.String("out", "-", "write it here (- for standard output)")
	if err := parse(fs, args); err != nil {
		return err
	}
	auth, err := natsauth.Open(*dataDir)
	if err != nil {
		return err
	}
	conf := auth.ServerConfig()
	if *out == "-" {
		_, err := os.Stdout.WriteString(conf)
		return err
	}
	if err := schema.WriteSecret(*out, []byte(conf)); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "nats-server auth written to %s (account %s)\n", *out, auth.AccountPublicKey())
	return nil
}
