package objtest

import (
	"crypto/md5"
	"encoding/base64"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
)

// serve answers an authorized request of operation op.
func (a *Azure) serve(w http.ResponseWriter, r *http.Request, op, path string) {
	p, err := url.PathUnescape(strings.TrimPrefix(path, "/"))
	if err != nil {
		azureError(w, http.StatusBadRequest, "InvalidUri", "The path is not escaped correctly.")
		return
	}
	container, blob, _ := strings.Cut(p, "/")
	a.mu.Lock()
	defer a.mu.Unlock()
	blobs, ok := a.containers[container]
	if op == "Container_Create" {
		if ok {
			azureError(w, http.StatusConflict, "ContainerAlreadyExists", "The specified container already exists.")
			return
		}
		a.containers[container] = map[string]*azureBlob{}
		w.WriteHeader(http.StatusCreated)
		return
	}
	if !ok {
		azureError(w, http.StatusNotFound, "ContainerNotFound", "The specified container does not exist.")
		return
	}
	switch op {
	case "Container_GetProperties":
		w.Header().Set("x-ms-version", a.spec.Version)
	case "Container_ListBlobHierarchySegment", "Container_ListBlobFlatSegment":
		a.list(w, r, container, blobs)
	case "Blob_Download", "Blob_GetProperties":
		a.download(w, r, blobs[blob], op == "Blob_GetProperties")
	case "BlockBlob_StageBlock":
		body, err := io.ReadAll(r.Body)
		if err != nil {
			azureError(w, http.StatusBadRequest, "InvalidInput", err.Error())
			return
		}
		a.blocks[container+"/"+blob+"/"+r.URL.Query().Get("blockid")] = body
		w.WriteHeader(http.StatusCreated)
	case "BlockBlob_CommitBlockList":
		a.commit(w, r, container, blob, op)
	case "BlockBlob_Upload":
		body, err := io.ReadAll(r.Body)
		if err != nil {
			azureError(w, http.StatusBadRequest, "InvalidInput", err.Error())
			return
		}
		blobs[blob] = newAzureBlob(body, r.Header.Get("x-ms-blob-content-type"), metadata(r.Header))
		a.written(w, blobs[blob])
	case "Blob_Delete":
		if _, ok := blobs[blob]; !ok {
			azureError(w, http.StatusNotFound, "BlobNotFound", "The specified blob does not exist.")
			return
		}
		delete(blobs, blob)
		w.WriteHeader(http.StatusAccepted)
	default:
		azureError(w, http.StatusNotImplemented, "NotImplemented", "The test service does not implement "+op+".")
	}
}

func metadata(h http.Header) map[string]string {
	m := map[string]string{}
	for k, vs := range h {
		if name, ok := strings.CutPrefix(strings.ToLower(k), "x-ms-meta-"); ok {
			m[name] = strings.Join(vs, ",")
		}
	}
	return m
}

func (a *Azure) written(w http.ResponseWriter, b *azureBlob) {
	w.Header().Set("ETag", b.etag)
	w.Header().Set("Last-Modified", b.modified.Format(http.TimeFormat))
	w.WriteHeader(http.StatusCreated)
}

// commit assembles a blob from its staged blocks (Put Block List).
func (a *Azure) commit(w http.ResponseWriter, r *http.Request, container, blob, op string) {
	var list struct {
		XMLName xml.Name
		IDs     []struct {
			XMLName xml.Name
			ID      string `xml:",chardata"`
		} `xml:",any"`
	}
	if err := xml.NewDecoder(r.Body).Decode(&list); err != nil || list.XMLName.Local != a.spec.BodyElement(op) {
		a.violations = append(a.violations, fmt.Sprintf("%s %s: the body is not a %s document (%v)", r.Method, r.URL.Path, a.spec.BodyElement(op), err))
		azureError(w, http.StatusBadRequest, "InvalidXmlDocument", "XML specified is not syntactically valid.")
		return
	}
	var data []byte
	for _, id := range list.IDs {
		b, ok := a.blocks[container+"/"+blob+"/"+id.ID]
		if !ok {
			azureError(w, http.StatusBadRequest, "InvalidBlockList", "The specified block list is invalid.")
			return
		}
		data = append(data, b...)
	}
	for k := range a.blocks {
		if strings.HasPrefix(k, container+"/"+blob+"/") {
			delete(a.blocks, k)
		}
	}
	b := newAzureBlob(data, r.Header.Get("x-ms-blob-content-type"), metadata(r.Header))
	a.containers[container][blob] = b
	a.written(w, b)
}

// download answers Get Blob and Get Blob Properties, with a range
// (x-ms-range or Range).
func (a *Azure) download(w http.ResponseWriter, r *http.Request, b *azureBlob, head bool) {
	if b == nil {
		if head {
			w.Header().Set("x-ms-error-code", "BlobNotFound")
			w.WriteHeader(http.StatusNotFound)
			return
		}
		azureError(w, http.StatusNotFound, "BlobNotFound", "The specified blob does not exist.")
		return
	}
	h := w.Header()
	h.Set("Content-Type", b.ctype)
	h.Set("ETag", b.etag)
	h.Set("Last-Modified", b.modified.Format(http.TimeFormat))
	h.Set("x-ms-blob-type", "BlockBlob")
	h.Set("Accept-Ranges", "bytes")
	for k, v := range b.meta {
		h.Set("x-ms-meta-"+k, v)
	}
	data, status := b.data, http.StatusOK
	rng := r.Header.Get("x-ms-range")
	if rng == "" {
		rng = r.Header.Get("Range")
	}
	if start, end, ok := parseRange(rng, len(data)); ok && !head {
		h.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", start, end, len(data)))
		data, status = data[start:end+1], http.StatusPartialContent
	}
	h.Set("Content-Length", strconv.Itoa(len(data)))
	w.WriteHeader(status)
	if !head {
		w.Write(data)
	}
}

// parseRange reads "bytes=START-[END]" within size.
func parseRange(s string, size int) (int, int, bool) {
	spec, ok := strings.CutPrefix(s, "bytes=")
	if !ok || size == 0 {
		return 0, 0, false
	}
	from, to, _ := strings.Cut(spec, "-")
	start, err := strconv.Atoi(from)
	if err != nil || start >= size {
		return 0, 0, false
	}
	end := size - 1
	if e, err := strconv.Atoi(to); err == nil && e < end {
		end = e
	}
	return start, end, true
}

// list answers List Blobs, with prefixes for the delimiter.
func (a *Azure) list(w http.ResponseWriter, r *http.Request, container string, blobs map[string]*azureBlob) {
	q := r.URL.Query()
	prefix, delim := q.Get("prefix"), q.Get("delimiter")
	var names []string
	for n := range blobs {
		if strings.HasPrefix(n, prefix) {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	var b strings.Builder
	fmt.Fprintf(&b, `<?xml version="1.0" encoding="utf-8"?><EnumerationResults ServiceEndpoint="%s/" ContainerName="%s"><Prefix>%s</Prefix><Delimiter>%s</Delimiter><Blobs>`,
		xmlEscape(a.URL), xmlEscape(container), xmlEscape(prefix), xmlEscape(delim))
	seen := map[string]bool{}
	for _, n := range names {
		if delim != "" {
			if i := strings.Index(n[len(prefix):], delim); i >= 0 {
				p := n[:len(prefix)+i+len(delim)]
				if !seen[p] {
					seen[p] = true
					fmt.Fprintf(&b, `<BlobPrefix><Name>%s</Name></BlobPrefix>`, xmlEscape(p))
				}
				continue
			}
		}
		bl := blobs[n]
		md5 := base64.StdEncoding.EncodeToString(md5Sum(bl.data))
		fmt.Fprintf(&b, `<Blob><Name>%s</Name><Properties><Last-Modified>%s</Last-Modified><Etag>%s</Etag><Content-Length>%d</Content-Length><Content-Type>%s</Content-Type><Content-MD5>%s</Content-MD5><BlobType>BlockBlob</BlobType><AccessTier>Hot</AccessTier><AccessTierInferred>true</AccessTierInferred><LeaseStatus>unlocked</LeaseStatus><LeaseState>available</LeaseState></Properties><Metadata>`,
			xmlEscape(n), bl.modified.Format(http.TimeFormat), xmlEscape(bl.etag), len(bl.data), xmlEscape(bl.ctype), md5)
		for k, v := range bl.meta {
			fmt.Fprintf(&b, `<%s>%s</%s>`, k, xmlEscape(v), k)
		}
		b.WriteString(`</Metadata></Blob>`)
	}
	b.WriteString(`</Blobs><NextMarker /></EnumerationResults>`)
	w.Header().Set("Content-Type", "application/xml")
	w.Write([]byte(b.String()))
}

func md5Sum(b []byte) []byte {
	s := md5.Sum(b)
	return s[:]
}
