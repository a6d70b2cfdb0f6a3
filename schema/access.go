package schema

import "strings"

// Who may do what on the log. Every NATS client authenticates (the edge's embedded server
// included) as one of three roles, and each role's permissions are the subjects below and
// nothing else: a worker cannot publish a job, touch a stream's configuration or write SITES;
// the ops identity reads reports and history but no secret. The edge turns these lists into
// the user JWTs it signs (schema/natsauth); ops/RUNBOOK.md explains them to an SRE.
//
// Permissions check the subject a client publishes to, never the reply subject it names, and
// JetStream sends each answer (an API response, a direct get, a delivered job) to that reply
// subject, where a stream stores it like any message. Within one account a read permission is
// therefore also a way to write, with the server's answer as the content, to any subject a
// stream captures. So the ops identity lives in an account of its own (OPS) and reaches the
// streams' read API through service imports under OpsAPIPrefix: its replies land in OPS,
// where nothing is stored. Workers share the edge's account (pull consumers and key-value
// watches across accounts are not worth their cost per job); what that leaves open, and how
// each part holds anyway (signed SITES values, checked results, heartbeats that name their
// worker, thread ids of the right shape), is in ops/RUNBOOK.md "Who may do what on NATS".

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
// identity of the edge's account may subscribe under its own prefix only, so no one reads
// another's replies (a worker's pull responses carry visitors' text, its SITES reads carry
// tokens). The ops identity is alone in its account: the default _INBOX.
func InboxPrefix(role Role, workerID string) string {
	switch role {
	case RoleWorker:
		return "_INBOX_worker_" + Token(workerID)
	case RoleOps:
		return "_INBOX"
	}
	return "_INBOX_" + string(role)
}

// OpsAPIPrefix is where the ops account reaches the edge account's JetStream API
// (`nats --js-api-prefix JS.SPOOKAT.API`, jetstream.NewWithAPIPrefix).
const OpsAPIPrefix = "JS.SPOOKAT.API"

// OpsImports are the JetStream API subjects of the edge's account the ops account imports
// (each under OpsAPIPrefix instead of $JS.API): reports, consumer state, message gets on
// JOBS, RESULTS and DEAD, direct gets on WORKERS and THREADS. Nothing on SITES but its
// stream info, and no consumer anywhere (`nats stream get`, not `nats stream view`).
func OpsImports() []string {
	subs := []string{
		"$JS.API.INFO",
		"$JS.API.STREAM.NAMES",
		"$JS.API.STREAM.LIST",
		"$JS.API.STREAM.INFO.*",
		"$JS.API.CONSUMER.NAMES.*",
		"$JS.API.CONSUMER.LIST.*",
		"$JS.API.CONSUMER.INFO.*.*",
	}
	for _, s := range []string{StreamJobs, StreamResults, StreamDead, StreamInbound} {
		subs = append(subs, "$JS.API.STREAM.MSG.GET."+s, "$JS.API.DIRECT.GET."+s, "$JS.API.DIRECT.GET."+s+".>")
	}
	for _, b := range []string{BucketWorkers, BucketThreads} {
		subs = append(subs, "$JS.API.DIRECT.GET.KV_"+b+".>")
	}
	// No consumer anywhere: a consumer's body (durable, a push deliver subject in the edge's
	// account) is beyond what permissions see. History is read with message and direct gets.
	return subs
}

// OpsLocal is an imported API subject as the ops account publishes it.
func OpsLocal(subject string) string {
	return OpsAPIPrefix + strings.TrimPrefix(subject, "$JS.API")
}

// OpsImportIsStream reports whether an ops import answers with many messages (a pull).
func OpsImportIsStream(subject string) bool {
	return strings.HasPrefix(subject, "$JS.API.CONSUMER.MSG.NEXT.")
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
// everything else is denied), less what DenyPublish takes back.
type Permissions struct {
	Publish     []string
	DenyPublish []string
	Subscribe   []string
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
				"$JS.ACK." + StreamInbound + ".>", // and recorded inbound events
				"$O." + BucketInboundFiles + ".>", // delete the files it took
				"$KV." + BucketSites + ".>",       // keep SITES current
				"$JS.FC.KV_" + BucketSites + ".>", // and watch it (flow control)
				"$KV." + BucketThreads + ".>",     // refill THREADS from SQLite on a new JetStream (a restore)
			},
			// its replies, and the consumers others create (it removes the unexpected ones)
			Subscribe: []string{inbox, "$JS.EVENT.ADVISORY.CONSUMER.CREATED.>"},
		}
	case RoleWorker:
		pub := []string{
			ResultSubject(workerID),
			InboundSubject(workerID),
			// The files it fetched (unique names: it never replaces, so never purges).
			"$O." + BucketInboundFiles + ".>",
			"$JS.API.STREAM.INFO.OBJ_" + BucketInboundFiles,
			"$JS.API.STREAM.MSG.GET.OBJ_" + BucketInboundFiles,
			"$JS.API.DIRECT.GET.OBJ_" + BucketInboundFiles + ".>",
			"dead.>",
			"$JS.API.STREAM.INFO." + StreamJobs,
			"$JS.API.CONSUMER.INFO." + StreamJobs + ".*",
			"$JS.API.CONSUMER.MSG.NEXT." + StreamJobs + ".*",
			"$JS.API.CONSUMER.UNPIN." + StreamJobs + ".*",
			"$JS.API.STREAM.MSG.GET." + StreamJobs, // after a takeover: is the partition's head in its hands?
			"$JS.ACK." + StreamJobs + ".>",
			"$KV." + BucketThreads + ".>",
			"$KV." + BucketWorkers + "." + WorkerKey(workerID),
		}
		pub = append(pub, kvRead(BucketSites)...)
		pub = append(pub, kvRead(BucketThreads)...)
		pub = append(pub, kvRead(BucketWorkers)...)
		return Permissions{Publish: pub, Subscribe: []string{inbox}}
	case RoleOps:
		var pub []string
		for _, sub := range OpsImports() {
			pub = append(pub, OpsLocal(sub))
		}
		return Permissions{Publish: pub, Subscribe: []string{inbox}}
	}
	return Permissions{}
}
