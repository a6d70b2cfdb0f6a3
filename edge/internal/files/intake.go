package files

import (
	"context"
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"strconv"
	"time"

	"spookat/edge/internal/store"
	"spookat/schema"
)

// Defaults of an Intake.
const (
	DefaultQuota   = 1_000_000_000 // what a site's attachments may hold on disk, all together (as the messages count them)
	DefaultReserve = 1_000_000_000 // what uploads leave free on the disk
)

// Intake takes an attachment, a visitor's or an operator's, the same way: the site's size
// limit and quota, the disk's reserve, the type sniffed from its content, the bytes written
// durably here (never on the SQLite writer's goroutine), then the row named in SQLite.
// Rate limits and who may upload are the callers'.
type Intake struct {
	Store *store.Store
	Dir   Dir
	Quota int64 // per site, in bytes (0: DefaultQuota)
	// SiteQuota, if set, is a site's own quota (its plan's; 0: Quota).
	SiteQuota func(siteID int64) int64
	Reserve   int64 // left free on the disk (0: DefaultReserve; < 0: none)
	Log       *slog.Logger
}

// Problem is why an attachment was not taken: an HTTP status, a code (schema.Code…) and a
// sentence for the person sending it.
type Problem struct {
	Status  int
	Code    string
	Message string
}

func (in *Intake) quota(siteID int64) int64 {
	if in.SiteQuota != nil {
		if q := in.SiteQuota(siteID); q > 0 {
			return q
		}
	}
	if in.Quota > 0 {
		return in.Quota
	}
	return DefaultQuota
}

func (in *Intake) reserve() int64 {
	switch {
	case in.Reserve < 0:
		return 0
	case in.Reserve > 0:
		return in.Reserve
	}
	return DefaultReserve
}

// CheckSize refuses a file of size bytes over the site's limit, or empty: what a caller asks
// before anything costlier (Take asks it again).
func CheckSize(size, limit int64) *Problem {
	if size > limit {
		return &Problem{http.StatusRequestEntityTooLarge, schema.CodeFileTooLarge,
			"The file is " + (&schema.File{Size: size}).SizeText() + "; this chat takes files up to " + (&schema.File{Size: limit}).SizeText() + "."}
	}
	if size == 0 {
		return &Problem{http.StatusBadRequest, schema.CodeInvalid, "The file is empty."}
	}
	return nil
}

var unavailable = &Problem{http.StatusServiceUnavailable, schema.CodeUnavailable, "The file could not be saved now; send it again."}

// Take checks the upload fh for the site (limit: its largest file, > 0) and stores it,
// uploaded by uploader (a visitor's token hash, or OperatorUploader's): the row, or why not.
func (in *Intake) Take(ctx context.Context, siteID, limit int64, fh *multipart.FileHeader, uploader []byte) (*store.File, *Problem) {
	if p := CheckSize(fh.Size, limit); p != nil {
		return nil, p
	}
	if p := in.room(ctx, siteID, fh.Size); p != nil {
		return nil, p
	}
	data, err := readUpload(fh, limit)
	if err != nil {
		return nil, &Problem{http.StatusBadRequest, schema.CodeInvalid, "The file could not be read from the request."}
	}
	return in.store(ctx, siteID, fh.Filename, fh.Header.Get("Content-Type"), data, uploader)
}

// TakeBytes is Take for a file already in memory (one a worker fetched from outside).
func (in *Intake) TakeBytes(ctx context.Context, siteID, limit int64, name, contentType string, data []byte, uploader []byte) (*store.File, *Problem) {
	if p := CheckSize(int64(len(data)), limit); p != nil {
		return nil, p
	}
	if p := in.room(ctx, siteID, int64(len(data))); p != nil {
		return nil, p
	}
	return in.store(ctx, siteID, name, contentType, data, uploader)
}

// room refuses a file of size the site's quota or the disk's reserve has no room for.
func (in *Intake) room(ctx context.Context, siteID, size int64) *Problem {
	used, err := in.Store.SiteFileBytes(ctx, siteID, time.Now().Add(-store.UnsentFileTTL))
	if err != nil {
		in.Log.Error("attachment quota", "site", siteID, "err", err)
		return unavailable
	}
	if used+size > in.quota(siteID) {
		in.Log.Warn("attachment quota reached", "site", siteID, "used", used)
		return &Problem{http.StatusInsufficientStorage, schema.CodeQuota,
			"This site's storage for attachments is full: the file was not sent. Describe it in a message instead."}
	}
	// The disk is a budget: uploads stop at a reserve that the database, the log and the
	// other sites' files keep, before the machine's own limit.
	if free, err := in.Dir.Free(); err == nil && free-size < in.reserve() {
		in.Log.Warn("attachment refused: the disk is at its reserve", "site", siteID, "free", free, "reserve", in.reserve())
		return &Problem{http.StatusInsufficientStorage, schema.CodeDiskFull,
			"The server's disk is nearly full: the file was not sent. Describe it in a message instead."}
	}
	return nil
}

// store sniffs data's type, writes it durably and names it in SQLite.
func (in *Intake) store(ctx context.Context, siteID int64, filename, contentType string, data []byte, uploader []byte) (*store.File, *Problem) {
	typ, why := Sniff(filename, contentType, data[:min(len(data), 512)])
	if why != nil {
		return nil, &Problem{http.StatusUnsupportedMediaType, schema.CodeFileRefused, why.Message}
	}
	key := NewKey()
	sum, err := in.Dir.Put(key, data)
	if err != nil {
		in.Log.Error("write attachment", "site", siteID, "err", err)
		return nil, unavailable
	}
	row := &store.File{Key: key, SiteID: siteID, TokenHash: uploader, Name: NameFor(CleanName(filename), typ), Type: typ,
		Size: int64(len(data)), SHA256: sum}
	if err := in.Store.Write(ctx, func(tx *store.Tx) error { return tx.InsertFile(row) }); err != nil {
		_ = in.Dir.Remove(key)
		in.Log.Error("name attachment", "site", siteID, "err", err)
		return nil, unavailable
	}
	return row, nil
}

func readUpload(fh *multipart.FileHeader, limit int64) ([]byte, error) {
	f, err := fh.Open()
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, limit))
}

// OperatorUploader is what a file's row names as its uploader when an operator sent it: no
// visitor token hashes to it (a visitor's is a SHA-256 of 32 bytes; this is shorter).
func OperatorUploader(operatorID int64) []byte {
	return []byte("operator:" + strconv.FormatInt(operatorID, 10))
}
