package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"

	"github.com/agentctl/agentctl/model"
	"github.com/agentctl/agentctl/sandbox"
)

// DefaultMaxImageBytes is view_image's size cap when none is configured.
const DefaultMaxImageBytes = 10 << 20

// ViewImage is the view_image tool of the filesystem capability.
type ViewImage struct {
	ws   *sandbox.Workspace
	opts FilesystemOptions
}

// NewViewImage returns the view_image tool reading images from ws.
func NewViewImage(ws *sandbox.Workspace, opts FilesystemOptions) *ViewImage {
	if opts.MaxImageBytes <= 0 {
		opts.MaxImageBytes = DefaultMaxImageBytes
	}
	return &ViewImage{ws: ws, opts: opts}
}

const viewImageSchema = `{
  "properties": {
    "path": {"description": "Path to the image file. Workspace paths and explicitly granted sandbox paths are supported.", "minLength": 1, "title": "Path", "type": "string"}
  },
  "required": ["path"],
  "title": "ViewImageArgs",
  "type": "object"
}`

// Definition implements Tool.
func (t *ViewImage) Definition() model.Tool {
	return model.Tool{
		Name:        "view_image",
		Description: "Loads an image from the sandbox workspace or an explicitly granted sandbox path and returns it as a structured image output.",
		Parameters:  json.RawMessage(viewImageSchema),
	}
}

// supportedImages are the media types models accept as input images.
var supportedImages = map[string]bool{
	"image/png": true, "image/jpeg": true, "image/gif": true, "image/webp": true,
}

// Call implements Tool: it returns the image in Output.Images, its media
// type sniffed from the content. Missing files, files over the size cap
// and files that are not PNG, JPEG, GIF or WebP are tool errors.
func (t *ViewImage) Call(ctx context.Context, arguments string) (Output, error) {
	var a struct {
		Path *string `json:"path"`
	}
	if err := decodeArgs("view_image", arguments, &a); err != nil {
		return Output{}, err
	}
	if a.Path == nil || *a.Path == "" {
		return Output{}, errors.New(`view_image: "path" is required: give the image's path, e.g. {"path": "output/chart.png"}`)
	}
	p := *a.Path
	rel, err := toolPath(t.opts.Root, p)
	if err != nil {
		return Output{}, fmt.Errorf("view_image: %w", err)
	}
	if rel == "" {
		return Output{}, fmt.Errorf("view_image: image path `%s` is the workspace root, not a file", p)
	}
	// The raw sandbox, not the workspace: scrubbing would corrupt binary data.
	data, err := t.ws.Sandbox.ReadFile(ctx, rel, t.opts.MaxImageBytes)
	if err != nil {
		if uerr := t.ws.Unavailable(ctx, err); isUnavailable(uerr) {
			return Output{}, fmt.Errorf("view_image: reading `%s`: %w", p, uerr)
		}
		fi, serr := t.ws.Sandbox.Stat(ctx, rel)
		switch {
		case serr != nil && notExist(serr), serr == nil && notExist(err):
			return Output{}, fmt.Errorf("view_image: image path `%s` was not found", p)
		case serr == nil && fi.Mode.IsDir():
			return Output{}, fmt.Errorf("view_image: image path `%s` is a directory, not an image file", p)
		case serr == nil && fi.Mode.IsRegular() && fi.Size > t.opts.MaxImageBytes:
			return Output{}, t.tooLarge(p)
		case serr == nil && errors.Is(err, sandbox.ErrNotRegular) && fi.Mode&fs.ModeSymlink == 0:
			return Output{}, fmt.Errorf("view_image: image path `%s` is %s, not an image file", p, sandbox.FileTypeName(fi.Mode))
		case errors.Is(err, sandbox.ErrPathEscape):
			return Output{}, fmt.Errorf("view_image: %w", err)
		}
		return Output{}, fmt.Errorf("view_image: unable to read image at `%s`: %v", p, err)
	}
	if int64(len(data)) > t.opts.MaxImageBytes {
		return Output{}, t.tooLarge(p)
	}
	mt := http.DetectContentType(data)
	if !supportedImages[mt] {
		return Output{}, fmt.Errorf("view_image: image path `%s` is not a supported image file (PNG, JPEG, GIF or WebP)", p)
	}
	if t.ws.Scrub.Contains(data) {
		// Image bytes cannot be scrubbed without corrupting the image.
		return Output{}, fmt.Errorf("view_image: image `%s` contains a sensitive value (or an encoding of one) in its bytes, so it is not shown; view another image or re-render this one without the secret", t.ws.Scrub.String(p))
	}
	return Output{Images: []model.Image{{MediaType: mt, Data: data}}}, nil
}

func (t *ViewImage) tooLarge(p string) error {
	return fmt.Errorf("view_image: image path `%s` exceeded the allowed size of %s; resize or compress the image and try again", p, sizeLabel(t.opts.MaxImageBytes))
}

func sizeLabel(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
