package schema

import (
	"bytes"
	"hash/fnv"
	"strconv"
	"strings"
)

// A batch is one JOBS message carrying the jobs of one lane's partition that one publish
// window of the edge produced, one JSON object per line, in message id order. Storing,
// delivering, acking and deleting a JetStream message is the log's cost per message; a batch
// pays it once for all its jobs. A worker acks the batch when every job in it is delivered
// or dead.
//
// Its Nats-Msg-Id is BatchID(lane, partition, through), where through is the last message id
// of the window. The edge persists each window's end (the outbox_cuts table) before it
// publishes the window, so after a crash it re-forms exactly the same batches with the same
// ids and JetStream's duplicate window drops those already stored.
//
// A JOBS message without the HeaderJobs header is one job (what edges before batches
// published); workers read both.
const HeaderJobs = "Spookat-Jobs" // the number of jobs in a batch

// BatchMaxBytes bounds a batch's body: well below the smallest JOBS byte budget the edge
// accepts, so a full JOBS always has room for a batch once it has room at all. A single job
// larger than this travels alone.
const BatchMaxBytes = 32 << 10

// JobPartition is the partition JOBS stamps on a job of this conversation: what the stream's
// subject transform partition(JobPartitions, site, conversation) computes (FNV-1a of the two
// tokens, concatenated). The edge computes it itself for batches, which it publishes on their
// partition's subject; a conversation's single jobs and batched jobs share a partition.
func JobPartition(siteID, conversationID int64) int {
	var buf [40]byte
	b := strconv.AppendInt(buf[:0], siteID, 10)
	b = strconv.AppendInt(b, conversationID, 10)
	h := fnv.New32a()
	h.Write(b)
	return int(h.Sum32() % JobPartitions)
}

// BatchSubject is where a batch of a lane's partition is published, e.g. jobs.chat.7.w.1234
// for the window that ends at message 1234: five tokens, so the stream's transform (which
// stamps partitions on four-token subjects) leaves it as it is, under the partition's
// consumer filter.
func BatchSubject(lane string, partition int, through int64) string {
	return "jobs." + lane + "." + strconv.Itoa(partition) + ".w." + strconv.FormatInt(through, 10)
}

// BatchID is a batch's Nats-Msg-Id, e.g. "w1234.chat.7" for the jobs of chat partition 7 in
// the window that ends at message 1234.
func BatchID(lane string, partition int, through int64) string {
	return "w" + strconv.FormatInt(through, 10) + "." + lane + "." + strconv.Itoa(partition)
}

// BatchThrough parses the window end out of a BatchID.
func BatchThrough(id string) (int64, bool) {
	if len(id) < 2 || id[0] != 'w' {
		return 0, false
	}
	end := strings.IndexByte(id, '.')
	if end < 0 {
		end = len(id)
	}
	n, err := strconv.ParseInt(id[1:end], 10, 64)
	return n, err == nil
}

// SplitJobs calls fn with each job of a JOBS message: the lines of a batch (header
// HeaderJobs set), or the whole body of a single job. Blank lines are skipped.
func SplitJobs(batch bool, data []byte, fn func(line []byte)) {
	if !batch {
		fn(data)
		return
	}
	eachLine(data, fn)
}

// eachLine calls fn with each line of data that is not blank: the JSON lines of a batch of
// jobs or of results.
func eachLine(data []byte, fn func(line []byte)) {
	for len(data) > 0 {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		if len(bytes.TrimSpace(line)) > 0 {
			fn(line)
		}
	}
}
