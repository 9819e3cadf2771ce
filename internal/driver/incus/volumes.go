package incus

// Volumes are custom filesystem volumes in the backend's storage pool.
// Seeding from a local directory needs no instance: the driver streams the
// directory as a custom-volume backup (backup/index.yaml, then the files
// under backup/volume/) and imports it, which creates the volume with its
// labels and contents in one request.

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	incus "github.com/lxc/incus/v6/client"
	"github.com/lxc/incus/v6/shared/api"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/tarball"
)

const volumeType = "custom"

// CreateVolume creates the volume, seeded from spec.SourceDir if set.
func (d *Driver) CreateVolume(ctx context.Context, spec driver.VolumeSpec) (driver.Volume, error) {
	c, err := d.client(ctx)
	if err != nil {
		return driver.Volume{}, err
	}
	config := map[string]string{}
	labels := d.objectLabels(spec.Labels)
	labels[driver.LabelName] = spec.Name
	labelsToConfig(config, labels)
	if spec.SourceDir != "" {
		err = d.importVolume(ctx, c, spec, config)
	} else {
		err = c.CreateStoragePoolVolume(d.cfg.StoragePool, api.StorageVolumesPost{
			Name: spec.Name, Type: volumeType, ContentType: "filesystem",
			StorageVolumePut: api.StorageVolumePut{Config: config},
		})
	}
	if err != nil {
		return driver.Volume{}, d.errf(err, "create volume %q in pool %q", spec.Name, d.cfg.StoragePool)
	}
	return d.InspectVolume(ctx, spec.Name)
}

// importVolume creates the volume from a backup built on the fly.
func (d *Driver) importVolume(ctx context.Context, c incus.InstanceServer, spec driver.VolumeSpec, config map[string]string) error {
	if st, err := os.Stat(spec.SourceDir); err != nil || !st.IsDir() {
		return fmt.Errorf("source %q is not a readable directory (%v)", spec.SourceDir, err)
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeVolumeBackup(pw, d.cfg.StoragePool, spec.Name, config, spec.SourceDir)) }()
	op, err := c.CreateStoragePoolVolumeFromBackup(d.cfg.StoragePool, incus.StorageVolumeBackupArgs{BackupFile: pr, Name: spec.Name})
	if err == nil {
		err = op.WaitContext(ctx)
	}
	_ = pr.Close()
	if err != nil {
		if !errors.Is(translate(err), driver.ErrAlreadyExists) {
			d.deleteVolumeQuietly(c, spec.Name)
		}
		return fmt.Errorf("import from %s: %w", spec.SourceDir, err)
	}
	return nil
}

func (d *Driver) deleteVolumeQuietly(c incus.InstanceServer, name string) {
	_ = c.DeleteStoragePoolVolume(d.cfg.StoragePool, volumeType, name)
}

// backupIndex is the subset of Incus' backup index a custom volume needs.
// JSON is valid YAML, so no YAML library is needed.
type backupIndex struct {
	Name      string       `json:"name"`
	Pool      string       `json:"pool"`
	Optimized bool         `json:"optimized"`
	Type      string       `json:"type"`
	Config    backupConfig `json:"config"`
}

type backupConfig struct {
	Volume api.StorageVolume `json:"volume"`
}

// writeVolumeBackup writes a non-optimized custom volume backup of dir.
func writeVolumeBackup(w io.Writer, pool, name string, config map[string]string, dir string) error {
	idx := backupIndex{Name: name, Pool: pool, Type: volumeType, Config: backupConfig{Volume: api.StorageVolume{
		Name: name, Type: volumeType, ContentType: "filesystem",
		StorageVolumePut: api.StorageVolumePut{Config: config},
	}}}
	b, err := json.Marshal(idx)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(w)
	if err := tw.WriteHeader(&tar.Header{Name: "backup/index.yaml", Mode: 0o644, Size: int64(len(b))}); err != nil {
		return err
	}
	if _, err := tw.Write(b); err != nil {
		return err
	}
	if err := tarball.AddDir(tw, dir, "backup/volume"); err != nil {
		return err
	}
	return tw.Close()
}

// InspectVolume returns a volume of this backend.
func (d *Driver) InspectVolume(ctx context.Context, name string) (driver.Volume, error) {
	c, err := d.client(ctx)
	if err != nil {
		return driver.Volume{}, err
	}
	v, _, err := c.GetStoragePoolVolume(d.cfg.StoragePool, volumeType, name)
	if err != nil {
		return driver.Volume{}, d.errf(err, "volume %q", name)
	}
	if !d.ours(v.Config) {
		return driver.Volume{}, d.errf(errNotOurs, "volume %q", name)
	}
	return driver.Volume{Name: v.Name, Labels: labelsFromConfig(v.Config)}, nil
}

// DeleteVolume deletes the volume (Incus refuses while an instance uses
// it); a missing one is no error.
func (d *Driver) DeleteVolume(ctx context.Context, name string) error {
	c, err := d.client(ctx)
	if err != nil {
		return err
	}
	err = c.DeleteStoragePoolVolume(d.cfg.StoragePool, volumeType, name)
	if err != nil && api.StatusErrorCheck(err, 404) {
		return nil // already gone
	}
	return d.errf(err, "delete volume %q", name)
}
