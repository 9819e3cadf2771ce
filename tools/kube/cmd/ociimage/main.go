// Command ociimage writes a directory as a single-layer image tarball that
// `ctr images import` accepts: an OCI image layout whose index names the
// image (io.containerd.image.name), plus a Docker manifest.json. The test
// cluster reaches no registry, so its pause and busybox images come from here.
// The output is deterministic: owners, times and order are fixed.
//
// Usage: ociimage -ref docker.io/library/busybox:1.35 -out busybox.tar [-cmd sh] ROOTFS
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"
)

func main() {
	ref := flag.String("ref", "", "image reference, e.g. registry.k8s.io/pause:3.10")
	out := flag.String("out", "", "tarball to write")
	cmd := flag.String("cmd", "", "the image's command (split on spaces)")
	flag.Parse()
	if *ref == "" || *out == "" || flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: ociimage -ref REF -out TAR [-cmd CMD] ROOTFS")
		os.Exit(2)
	}
	if err := write(flag.Arg(0), *ref, *out, strings.Fields(*cmd)); err != nil {
		fmt.Fprintf(os.Stderr, "ociimage: %s: %v\n", *ref, err)
		os.Exit(1)
	}
}

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int               `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// blobs holds the image's content by digest, in the order it was added.
type blobs struct {
	order []string
	data  map[string][]byte
}

func (b *blobs) add(mediaType string, data []byte) descriptor {
	sum := sha256.Sum256(data)
	digest := "sha256:" + hex.EncodeToString(sum[:])
	if b.data == nil {
		b.data = map[string][]byte{}
	}
	if _, ok := b.data[digest]; !ok {
		b.order = append(b.order, digest)
		b.data[digest] = data
	}
	return descriptor{MediaType: mediaType, Digest: digest, Size: len(data)}
}

func write(rootfs, ref, out string, cmd []string) error {
	layer, err := layerTar(rootfs)
	if err != nil {
		return err
	}
	diffID := sha256.Sum256(layer)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	if _, err := zw.Write(layer); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}

	var content blobs
	layerDesc := content.add("application/vnd.oci.image.layer.v1.tar+gzip", gz.Bytes())
	config := map[string]any{
		"architecture": runtime.GOARCH,
		"os":           "linux",
		"config": map[string]any{
			"Env": []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
			"Cmd": cmd,
		},
		"rootfs":  map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + hex.EncodeToString(diffID[:])}},
		"history": []map[string]string{{"created_by": "tools/kube/cmd/ociimage"}},
	}
	configDesc := content.add("application/vnd.oci.image.config.v1+json", mustJSON(config))
	manifestDesc := content.add("application/vnd.oci.image.manifest.v1+json", mustJSON(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.manifest.v1+json",
		"config":        configDesc,
		"layers":        []descriptor{layerDesc},
	}))
	manifestDesc.Annotations = map[string]string{
		"io.containerd.image.name":          ref,
		"org.opencontainers.image.ref.name": tagOf(ref),
	}
	index := mustJSON(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.index.v1+json",
		"manifests":     []descriptor{manifestDesc},
	})
	dockerManifest := mustJSON([]map[string]any{{
		"Config":   "blobs/sha256/" + strings.TrimPrefix(configDesc.Digest, "sha256:"),
		"RepoTags": []string{ref},
		"Layers":   []string{"blobs/sha256/" + strings.TrimPrefix(layerDesc.Digest, "sha256:")},
	}})

	var archive bytes.Buffer
	tw := tar.NewWriter(&archive)
	files := []struct {
		name string
		data []byte
	}{
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{"index.json", index},
		{"manifest.json", dockerManifest},
	}
	for _, digest := range content.order {
		files = append(files, struct {
			name string
			data []byte
		}{"blobs/sha256/" + strings.TrimPrefix(digest, "sha256:"), content.data[digest]})
	}
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.data)), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		if _, err := tw.Write(f.data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return os.WriteFile(out, archive.Bytes(), 0o644)
}

// layerTar archives rootfs with root as owner and zero times, in name order.
func layerTar(rootfs string) ([]byte, error) {
	var paths []string
	err := filepath.WalkDir(rootfs, func(path string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if path != rootfs {
			paths = append(paths, path)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Strings(paths)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, path := range paths {
		info, err := os.Lstat(path)
		if err != nil {
			return nil, err
		}
		link := ""
		if info.Mode()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(path); err != nil {
				return nil, err
			}
		}
		hdr, err := tar.FileInfoHeader(info, link)
		if err != nil {
			return nil, err
		}
		rel, _ := filepath.Rel(rootfs, path)
		hdr.Name = filepath.ToSlash(rel)
		if info.IsDir() {
			hdr.Name += "/"
		}
		hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = 0, 0, "", ""
		hdr.ModTime, hdr.AccessTime, hdr.ChangeTime = time.Unix(0, 0), time.Time{}, time.Time{}
		hdr.Format = tar.FormatPAX
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if info.Mode().IsRegular() {
			if err := copyFile(tw, path); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func copyFile(w io.Writer, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(w, f)
	return err
}

func tagOf(ref string) string {
	last := ref[strings.LastIndex(ref, "/")+1:]
	if i := strings.LastIndex(last, ":"); i >= 0 {
		return last[i+1:]
	}
	return "latest"
}

func mustJSON(v any) []byte {
	data, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return data
}
