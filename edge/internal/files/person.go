package files

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"io"
	"time"

	"spookat/edge/internal/store"
)

// WritePersonArchive writes a person's data as one .tar.gz: person.json (store.PersonExport,
// its format and version inside) and each attachment at the path the document gives. A file
// missing from the disk (retention, a lost disk) is left out and the document says so with
// its path absent.
func WritePersonArchive(w io.Writer, p *store.PersonExport, dir Dir) error {
	gz := gzip.NewWriter(w)
	tw := tar.NewWriter(gz)
	now := time.Now()
	var files []store.PersonFile
	for _, f := range p.Files() {
		fh, err := dir.Open(f.Key)
		if err != nil {
			p.DropFile(f.Key)
			continue
		}
		fh.Close()
		files = append(files, f)
	}
	doc, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Name: "person.json", Mode: 0o600, Size: int64(len(doc)), ModTime: now}); err != nil {
		return err
	}
	if _, err := tw.Write(doc); err != nil {
		return err
	}
	for _, f := range files {
		fh, err := dir.Open(f.Key)
		if err != nil {
			return err
		}
		st, err := fh.Stat()
		if err == nil {
			err = tw.WriteHeader(&tar.Header{Name: f.Path, Mode: 0o600, Size: st.Size(), ModTime: now})
		}
		if err == nil {
			_, err = io.Copy(tw, fh)
		}
		fh.Close()
		if err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}
