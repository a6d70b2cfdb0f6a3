package schema

import (
	"strconv"

	"spookat/schema/fastjson"
)

// File is an attachment of a message, as frames, the inbox API and jobs carry it. Its type
// is what the server sniffed from the content; a browser's claim is never trusted.
type File struct {
	ID   string `json:"id"` // the file's key: /v1/widget/files/{id}, /v1/api/files/{id}
	Name string `json:"name"`
	Type string `json:"type"` // image/png, image/jpeg, image/gif, image/webp, application/pdf, text/plain, or application/octet-stream
	Size int64  `json:"size"`
	// URL is set in jobs only: a signed link that works without a login until it expires
	// (FileLinkTTL), for Slack, Discord, webhooks and email.
	URL string `json:"url,omitempty"`
}

// Image reports whether the file is shown inline (one of the image types the server serves
// as such); everything else is a download.
func (f *File) Image() bool {
	switch f.Type {
	case "image/png", "image/jpeg", "image/gif", "image/webp":
		return true
	}
	return false
}

// SizeText is the file's size as a person reads it: 812 B, 14 KB, 3.4 MB.
func (f *File) SizeText() string {
	switch n := f.Size; {
	case n < 1000:
		return strconv.FormatInt(n, 10) + " B"
	case n < 1000*1000:
		return strconv.FormatInt((n+500)/1000, 10) + " KB"
	default:
		return strconv.FormatFloat(float64(n)/1e6, 'f', 1, 64) + " MB"
	}
}

// Attachment limits and codes.
const (
	// DefaultFileMaxMB is a site's largest attachment when its settings say none
	// (WidgetSettings.FileMaxMB).
	DefaultFileMaxMB = 10
	MaxFileNameRunes = 200
	// CodeFileTooLarge: the file is over the site's limit; CodeFileRefused: its content is not
	// what its name or type says, or a type that is not taken; CodeQuota: the site's storage
	// for attachments is full; CodeDiskFull: the server's disk is at its reserve;
	// CodeNotConnected: the token is no connected visitor's of the site.
	CodeFileTooLarge = "file_too_large"
	CodeFileRefused  = "file_refused"
	CodeQuota        = "quota_exceeded"
	CodeDiskFull     = "disk_full"
	CodeNotConnected = "not_connected"
	// VisitorHeader carries the visitor's token on the widget's file requests (never in a URL,
	// which proxies log).
	VisitorHeader = "X-Spookat-Visitor"
	// FileNameHeader carries an upload's file name, percent-encoded.
	FileNameHeader = "X-Spookat-Filename"
)

// AppendFile appends `,"file":{…}` as encoding/json writes f (field of an object being
// written), nothing for nil.
func AppendFile(b []byte, f *File) []byte {
	if f == nil {
		return b
	}
	b = append(b, `,"file":{"id":`...)
	b = fastjson.AppendString(b, f.ID)
	b = append(b, `,"name":`...)
	b = fastjson.AppendString(b, f.Name)
	b = append(b, `,"type":`...)
	b = fastjson.AppendString(b, f.Type)
	b = append(b, `,"size":`...)
	b = strconv.AppendInt(b, f.Size, 10)
	if f.URL != "" {
		b = append(b, `,"url":`...)
		b = fastjson.AppendString(b, f.URL)
	}
	return append(b, '}')
}
