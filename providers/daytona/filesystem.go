package daytona

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strconv"
)

// FileSystem is a sandbox's toolbox files API, as the SDK's
// FileSystemService. Paths are absolute paths inside the sandbox.
type FileSystem struct{ s *Sandbox }

// FileInfo mirrors the toolbox FileInfo schema. The daemon stats with
// os.Stat, so symlinks are reported as what they point to.
type FileInfo struct {
	Name        string `json:"name"`
	Size        int64  `json:"size"`
	Mode        string `json:"mode"`
	ModTime     string `json:"modTime"`
	ModifiedAt  string `json:"modifiedAt"`
	IsDir       bool   `json:"isDir"`
	Permissions string `json:"permissions"`
	Owner       string `json:"owner"`
	Group       string `json:"group"`
}

func (f *FileSystem) req(method, endpoint, op, path string, idem bool) request {
	return request{method: method, url: f.s.toolbox(endpoint), query: url.Values{"path": {path}}, op: op + " " + strconv.Quote(path), sandbox: f.s.where(), idempotent: idem}
}

// UploadFile writes content to path (the daemon creates parent
// directories and overwrites an existing file).
func (f *FileSystem) UploadFile(ctx context.Context, content []byte, path string) error {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	w, err := mw.CreateFormFile("file", "file")
	if err != nil {
		return err
	}
	w.Write(content)
	mw.Close()
	r := f.req(http.MethodPost, "/files/upload", "upload file", path, true)
	r.body, r.contentType = buf.Bytes(), mw.FormDataContentType()
	return f.s.client.doJSON(ctx, r, nil, nil)
}

// FileUpload is one member of a bulk upload.
type FileUpload struct {
	Path    string
	Content []byte
}

// UploadFiles writes many files in one multipart request (fields
// files[i].path and files[i].file).
func (f *FileSystem) UploadFiles(ctx context.Context, files []FileUpload) error {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for i, u := range files {
		if err := mw.WriteField(fmt.Sprintf("files[%d].path", i), u.Path); err != nil {
			return err
		}
		w, err := mw.CreateFormFile(fmt.Sprintf("files[%d].file", i), "file")
		if err != nil {
			return err
		}
		w.Write(u.Content)
	}
	mw.Close()
	r := request{method: http.MethodPost, url: f.s.toolbox("/files/bulk-upload"), op: fmt.Sprintf("upload %d files", len(files)), sandbox: f.s.where(), idempotent: true,
		body: buf.Bytes(), contentType: mw.FormDataContentType()}
	return f.s.client.doJSON(ctx, r, nil, nil)
}

// DownloadFile streams a file's content; the caller closes it.
func (f *FileSystem) DownloadFile(ctx context.Context, path string) (io.ReadCloser, error) {
	r := f.req(http.MethodGet, "/files/download", "download file", path, true)
	r.stream = true
	resp, err := f.s.client.do(ctx, r)
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// GetFileInfo stats path.
func (f *FileSystem) GetFileInfo(ctx context.Context, path string) (*FileInfo, error) {
	var out FileInfo
	if err := f.s.client.doJSON(ctx, f.req(http.MethodGet, "/files/info", "stat", path, true), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListFiles lists a directory.
func (f *FileSystem) ListFiles(ctx context.Context, path string) ([]FileInfo, error) {
	var out []FileInfo
	if err := f.s.client.doJSON(ctx, f.req(http.MethodGet, "/files", "list directory", path, true), nil, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// CreateFolder creates a directory (and its parents) with an octal mode
// such as "755".
func (f *FileSystem) CreateFolder(ctx context.Context, path, mode string) error {
	r := f.req(http.MethodPost, "/files/folder", "create folder", path, true)
	r.query.Set("mode", mode)
	return f.s.client.doJSON(ctx, r, nil, nil)
}

// DeleteFile removes a file or directory.
func (f *FileSystem) DeleteFile(ctx context.Context, path string, recursive bool) error {
	r := f.req(http.MethodDelete, "/files", "delete", path, true)
	if recursive {
		r.query.Set("recursive", "true")
	}
	return f.s.client.doJSON(ctx, r, nil, nil)
}

// SetFilePermissions sets an octal mode such as "0644".
func (f *FileSystem) SetFilePermissions(ctx context.Context, path, mode string) error {
	r := f.req(http.MethodPost, "/files/permissions", "set permissions on", path, true)
	r.query.Set("mode", mode)
	return f.s.client.doJSON(ctx, r, nil, nil)
}
