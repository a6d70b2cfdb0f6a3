package schema

import "strings"

// Who may do what on the log. Every NATS client authenticates (the edge's embedded server
// included) as one of three roles, and each role's permissions are the subjects below and
// nothing else: a worker cannot publish a job, touch a stream's configuration or write SITES;
// the ops identity reads reports and history but no secret. The edge turns these lists into
// the user JWTs it signs (edge/internal/natsauth); ops/RUNBOOK.md explains them to an SRE.

// Role is what a NATS identity is for.
type Role string

const (
	RoleEdge   Role = "edge"   // publishes jobs, owns streams, consumers and buckets, records RESULTS
	RoleWorker Role = "worker" // pulls jobs, posts outside, publishes its results and dead jobs
	RoleOps    Role = "ops"    // an SRE's nats CLI: reports and stream history, read-only
)

// Roles lists the roles in the order the CLI shows them.
var Roles = []Role{RoleEdge, RoleWorker, RoleOps}

// Token turns a free-form id (a worker id such as systemd's "box1.example.com-2") into one
// subject token: characters other than letters, digits, - and _ become _. Subjects and keys
// that carry a worker id all go through it, so a dotted id cannot escape a one-token wildcard.
func Token(id string) string {
	b := []byte(id)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			b[i] = '_'
		}
	}
	if len(b) == 0 {
		return "_"
	}
	return string(b)
}

// WorkerKey is a worker's heartbeat key in the WORKERS bucket.
func WorkerKey(workerID string) string { return "w." + Token(workerID) }

// InboxPrefix is where an identity's request replies arrive (nats.CustomInboxPrefix). Each
// identity may subscribe under its own prefix only, so no one reads another's replies (a
// worker's pull responses carry visitors' text, its SITES reads carry tokens).
func InboxPrefix(role Role, workerID string) string {
	if role == RoleWorker {
		return "_INBOX_worker_" + Token(workerID)
	}
	return "_INBOX_" + string(role)
}

// IdentityName is the name in an identity's user JWT: the role, and for a worker its id
// ("worker box1-1"). bin/worker reads its id from there.
func IdentityName(role Role, workerID string) string {
	if role == RoleWorker {
		return string(role) + " " + workerID
	}
	return string(role)
}

// ParseIdentityName is IdentityName backwards.
func ParseIdentityName(name string) (role Role, workerID string) {
	r, id, _ := strings.Cut(name, " ")
	return Role(r), id
}

// Permissions are the subjects an identity may publish and subscribe to (allow lists:
// everything else is denied).
type Permissions struct {
	Publish   []string
	Subscribe []string
}

// kvRead is what reading and watching a bucket takes: its stream info, direct gets, and the
// ephemeral ordered consumer of a watch (create, flow control, delete).
func kvRead(bucket string) []string {
	s := "KV_" + bucket
	return []string{
		"$JS.API.STREAM.INFO." + s,
		"$JS.API.DIRECT.GET." + s + ".>",
		"$JS.API.CONSUMER.CREATE." + s + ".>",
		"$JS.API.CONSUMER.DELETE." + s + ".*",
		"$JS.FC." + s + ".>",
	}
}

// streamRead is what `nats stream get` takes on a stream and, with pager set, what `nats
// stream view` takes too: an ephemeral pull consumer of its own.
func streamRead(stream string, pager bool) []string {
	subs := []string{
		"$JS.API.STREAM.MSG.GET." + stream,
		"$JS.API.DIRECT.GET." + stream,
		"$JS.API.DIRECT.GET." + stream + ".>",
	}
	if pager {
		subs = append(subs,
			"$JS.API.CONSUMER.CREATE."+stream+".>",
			"$JS.API.CONSUMER.MSG.NEXT."+stream+".*",
			"$JS.API.CONSUMER.DELETE."+stream+".*",
		)
	}
	return subs
}

// RolePermissions returns a role's permissions. A worker's depend on its id: it may publish
// results only under results.<its id>, and write only its own WORKERS key.
func RolePermissions(role Role, workerID string) Permissions {
	inbox := InboxPrefix(role, workerID) + ".>"
	switch role {
	case RoleEdge:
		return Permissions{
			Publish: []string{
				"jobs.>",                          // publish jobs
				"$JS.API.>",                       // create and update streams, consumers and buckets
				"$JS.ACK." + StreamResults + ".>", // ack recorded results
				"$KV." + BucketSites + ".>",       // keep SITES current
			},
			Subscribe: []string{inbox},
		}
	case RoleWorker:
		pub := []string{
			ResultSubject(workerID),
			"dead.>",
			"$JS.API.STREAM.INFO." + StreamJobs,
			"$JS.API.CONSUMER.INFO." + StreamJobs + ".*",
			"$JS.API.CONSUMER.MSG.NEXT." + StreamJobs + ".*",
			"$JS.API.CONSUMER.UNPIN." + StreamJobs + ".*",
			"$JS.ACK." + StreamJobs + ".>",
			"$KV." + BucketThreads + ".>",
			"$KV." + BucketWorkers + "." + WorkerKey(workerID),
		}
		pub = append(pub, kvRead(BucketSites)...)
		pub = append(pub, kvRead(BucketThreads)...)
		pub = append(pub, kvRead(BucketWorkers)...)
		return Permissions{Publish: pub, Subscribe: []string{inbox}}
	case RoleOps:
		pub := []string{
			"$JS.API.INFO",
			"$JS.API.STREAM.NAMES",
			"$JS.API.STREAM.LIST",
			"$JS.API.STREAM.INFO.*",
			"$JS.API.CONSUMER.NAMES.*",
			"$JS.API.CONSUMER.LIST.*",
			"$JS.API.CONSUMER.INFO.*.*",
		}
		// No consumer on JOBS: on a work queue a consumer's ack deletes the job.
		pub = append(pub, streamRead(StreamJobs, false)...)
		pub = append(pub, streamRead(StreamResults, true)...)
		pub = append(pub, streamRead(StreamDead, true)...)
		pub = append(pub, kvRead(BucketWorkers)...) // nats kv ls WORKERS
		pub = append(pub, kvRead(BucketThreads)...)
		return Permissions{Publish: pub, Subscribe: []string{inbox}}
	}
	return Permissions{}
}
