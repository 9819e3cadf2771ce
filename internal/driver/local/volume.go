package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/names"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/tarball"
)

// A volume is <backend>/volumes/<name>/: volume.json (labels) and data/,
// the directory bound into instances.

const volumeMeta = "volume.json"

func (d *Driver) volumeData(name string) string { return filepath.Join(d.volumeDir(name), "data") }

// CreateVolume makes the directory and seeds it from spec.SourceDir.
func (d *Driver) CreateVolume(_ context.Context, spec driver.VolumeSpec) (driver.Volume, error) {
	if err := names.ValidateName(spec.Name); err != nil {
		return driver.Volume{}, d.errf("volume: %w", err)
	}
	if err := os.MkdirAll(filepath.Join(d.root, "volumes"), 0o711); err != nil {
		return driver.Volume{}, d.errf("volume %q: %w", spec.Name, err)
	}
	// Build it aside and rename, so a failed seed leaves nothing behind and a
	// concurrent create of the same name cannot mix two seeds.
	tmp, err := os.MkdirTemp(filepath.Join(d.root, "volumes"), ".create-")
	if err != nil {
		return driver.Volume{}, d.errf("volume %q: %w", spec.Name, err)
	}
	defer os.RemoveAll(tmp)
	labels := driver.ObjectLabels(d.backend, d.cfg.Labels, spec.Labels)
	labels[driver.LabelName] = spec.Name
	if err := seedVolume(tmp, spec.SourceDir, labels); err != nil {
		return driver.Volume{}, d.errf("volume %q: %w", spec.Name, err)
	}
	if err := os.Rename(tmp, d.volumeDir(spec.Name)); err != nil {
		if _, statErr := os.Stat(d.volumeDir(spec.Name)); statErr == nil {
			return driver.Volume{}, d.errf("volume %q: %w", spec.Name, driver.ErrAlreadyExists)
		}
		return driver.Volume{}, d.errf("volume %q: %w", spec.Name, err)
	}
	return driver.Volume{Name: spec.Name, Labels: labels}, nil
}

func seedVolume(dir, source string, labels map[string]string) error {
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o755); err != nil {
		return err
	}
	if source != "" {
		if err := copyTree(source, data); err != nil {
			return fmt.Errorf("seed from %s: %w", source, err)
		}
	}
	b, _ := json.MarshalIndent(driver.Volume{Labels: labels}, "", "  ")
	return os.WriteFile(filepath.Join(dir, volumeMeta), b, 0o644)
}

// InspectVolume reads a volume's labels.
func (d *Driver) InspectVolume(_ context.Context, name string) (driver.Volume, error) {
	b, err := os.ReadFile(filepath.Join(d.volumeDir(name), volumeMeta))
	if errors.Is(err, os.ErrNotExist) || names.ValidateName(name) != nil {
		return driver.Volume{}, d.errf("volume %q: %w", name, driver.ErrNotFound)
	}
	if err != nil {
		return driver.Volume{}, d.errf("volume %q: %w", name, err)
	}
	var v driver.Volume
	if err := json.Unmarshal(b, &v); err != nil {
		return driver.Volume{}, d.errf("volume %q: corrupt %s: %w", name, volumeMeta, err)
	}
	v.Name = name
	return v, nil
}

// DeleteVolume removes a volume no instance mounts.
func (d *Driver) DeleteVolume(ctx context.Context, name string) error {
	if _, err := d.InspectVolume(ctx, name); err != nil {
		return err
	}
	states, err := d.allStates()
	if err != nil {
		return err
	}
	for _, st := range states {
		for _, m := range st.Spec.Mounts {
			if m.Volume == name {
				return d.errf("volume %q is mounted by instance %q; delete the instance first", name, st.Spec.Name)
			}
		}
	}
	// Rename first so a half-removed volume is never visible under its name.
	tmp := filepath.Join(d.root, "volumes", ".delete-"+name)
	if err := os.Rename(d.volumeDir(name), tmp); err != nil {
		return d.errf("volume %q: %w", name, err)
	}
	if err := os.RemoveAll(tmp); err != nil {
		return d.errf("volume %q: %w", name, err)
	}
	return nil
}

// copyTree copies regular files, directories and symlinks from src into
// dst, keeping permission bits. Other file types are skipped.
func copyTree(src, dst string) error {
	return tarball.Walk(src, nil, nil, func(p, rel string) error {
		target := filepath.Join(dst, filepath.FromSlash(rel))
		info, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch mode := info.Mode(); {
		case mode.IsDir():
			return os.Mkdir(target, mode.Perm()|0o700)
		case mode&fs.ModeSymlink != 0:
			link, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(link, target)
		case mode.IsRegular():
			return copyFile(p, target, mode.Perm())
		}
		return nil
	})
}

func copyFile(src, dst string, mode fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
