package dra

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"

	"k8s.io/apimachinery/pkg/util/validation"
	"tags.cncf.io/container-device-interface/pkg/parser"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/atomicfile"
)

// CheckpointVersion is the format Checkpoint writes and reads.
const CheckpointVersion = 1

// maxCheckpoint bounds what LoadCheckpoint reads: a node prepares a few
// claims, not megabytes of them.
const maxCheckpoint = 4 << 20

// Checkpoint is what the driver has prepared on this node, kept across
// restarts: the kubelet asks again to prepare a claim after a restart
// (prepare must then answer the same) and asks to unprepare claims whose
// objects are already deleted (only the checkpoint still knows them).
type Checkpoint struct {
	// Claims by claim UID.
	Claims map[string]Prepared
}

// Prepared is one claim as Prepare left it.
type Prepared struct {
	Namespace string           `json:"namespace"`
	Name      string           `json:"name"`
	Devices   []PreparedDevice `json:"devices"`
	// SpecFile is the base name of the claim's CDI spec in the CDI dir.
	SpecFile string `json:"specFile"`
}

// PreparedDevice is one allocated device of a prepared claim.
type PreparedDevice struct {
	Request string `json:"request"`
	Pool    string `json:"pool"`
	Device  string `json:"device"`
	// LUID is the adapter's LUID at prepare: what the CDI device selects.
	LUID        string `json:"luid"`
	AdminAccess bool   `json:"adminAccess,omitempty"`
	CDIDevice   string `json:"cdiDevice"`
}

// checkpointFile is the file's shape: the claims and a checksum of their
// encoding, so an edited or half-restored file is told apart from ours.
type checkpointFile struct {
	Version  int                 `json:"version"`
	Driver   string              `json:"driver"`
	Claims   map[string]Prepared `json:"claims"`
	Checksum string              `json:"checksum"`
}

// CheckpointError says why a checkpoint file cannot be used. The driver
// then replaces it with an empty checkpoint: a claim it prepared before is
// still unprepared, by its spec file's name, which follows from the
// claim's UID.
type CheckpointError struct {
	Path string
	Err  error
}

func (e *CheckpointError) Error() string {
	return fmt.Sprintf("checkpoint %s: %v: replacing it with an empty one; claims prepared before are still unprepared by their spec file's name", e.Path, e.Err)
}

func (e *CheckpointError) Unwrap() error { return e.Err }

// LoadCheckpoint reads path. A missing file is an empty checkpoint. A file
// that is not one this driver wrote (unknown version or driver, bad
// checksum, a claim UID, device or CDI name that prepare would never
// write, a spec file outside the CDI dir) is a *CheckpointError and never
// partly trusted.
func LoadCheckpoint(path string) (*Checkpoint, error) {
	cp := &Checkpoint{Claims: map[string]Prepared{}}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return cp, nil
	}
	if err != nil {
		return cp, &CheckpointError{path, err}
	}
	defer f.Close()
	fi, err := f.Stat()
	switch {
	case err != nil:
		return cp, &CheckpointError{path, err}
	case !fi.Mode().IsRegular():
		return cp, &CheckpointError{path, errors.New("not a regular file")}
	case fi.Size() > maxCheckpoint:
		return cp, &CheckpointError{path, fmt.Errorf("%d bytes, more than the %d a checkpoint can hold", fi.Size(), maxCheckpoint)}
	}
	data := make([]byte, fi.Size())
	if _, err := f.ReadAt(data, 0); err != nil && fi.Size() > 0 {
		return cp, &CheckpointError{path, err}
	}
	claims, err := decodeCheckpoint(data)
	if err != nil {
		return cp, &CheckpointError{path, err}
	}
	cp.Claims = claims
	return cp, nil
}

func decodeCheckpoint(data []byte) (map[string]Prepared, error) {
	var file checkpointFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&file); err != nil {
		return nil, fmt.Errorf("not a checkpoint: %w", err)
	}
	if dec.More() {
		return nil, errors.New("not a checkpoint: data after the JSON object")
	}
	switch {
	case file.Version != CheckpointVersion:
		return nil, fmt.Errorf("version %d, this driver reads %d", file.Version, CheckpointVersion)
	case file.Driver != DriverName:
		return nil, fmt.Errorf("written for driver %q, not %s", file.Driver, DriverName)
	}
	sum, err := checksum(file.Claims)
	if err != nil {
		return nil, err
	}
	if sum != file.Checksum {
		return nil, errors.New("checksum mismatch: the file was changed or cut since the driver wrote it")
	}
	if file.Claims == nil {
		file.Claims = map[string]Prepared{}
	}
	var errs []error
	for _, uid := range sortedKeys(file.Claims) {
		if err := validPrepared(uid, file.Claims[uid]); err != nil {
			errs = append(errs, fmt.Errorf("claim %q: %w", uid, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return file.Claims, nil
}

// validPrepared checks an entry is one Prepare could have written.
func validPrepared(uid string, p Prepared) error {
	if err := ValidUID(uid); err != nil {
		return err
	}
	if p.SpecFile != SpecFile(uid) {
		return fmt.Errorf("spec file %q is not the claim's (%s)", p.SpecFile, SpecFile(uid))
	}
	for _, msgs := range [][]string{validation.IsDNS1123Subdomain(p.Namespace), validation.IsDNS1123Subdomain(p.Name)} {
		if len(msgs) > 0 {
			return fmt.Errorf("namespace/name %q/%q: %s", p.Namespace, p.Name, msgs[0])
		}
	}
	if len(p.Devices) == 0 {
		return errors.New("no devices")
	}
	for _, d := range p.Devices {
		if msgs := validation.IsDNS1123Label(d.Device); len(msgs) > 0 {
			return fmt.Errorf("device %q: %s", d.Device, msgs[0])
		}
		if want := CDIDevice(uid, d.Device); d.CDIDevice != want {
			return fmt.Errorf("device %q: CDI device %q is not %q", d.Device, d.CDIDevice, want)
		}
	}
	return nil
}

// ValidUID accepts what the API server gives objects (a UUID) and nothing
// that could leave a file name.
func ValidUID(uid string) error {
	if uid == "" || len(uid) > 64 {
		return fmt.Errorf("claim UID %q: want 1 to 64 characters", uid)
	}
	for _, c := range uid {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return fmt.Errorf("claim UID %q: want lowercase letters, digits and '-'", uid)
		}
	}
	if _, _, _, err := parser.ParseQualifiedName(CDIDevice(uid, "x")); err != nil {
		return fmt.Errorf("claim UID %q: %w", uid, err)
	}
	return nil
}

// Save writes the checkpoint to path atomically: a crash leaves the old
// file or the new one.
func (c *Checkpoint) Save(path string) error {
	sum, err := checksum(c.Claims)
	if err != nil {
		return err
	}
	data, err := json.MarshalIndent(checkpointFile{Version: CheckpointVersion, Driver: DriverName, Claims: c.Claims, Checksum: sum}, "", "  ")
	if err != nil {
		return fmt.Errorf("encode checkpoint: %w", err)
	}
	if err := atomicfile.Write(path, append(data, '\n'), 0o600, atomicfile.Keep); err != nil {
		return fmt.Errorf("write checkpoint: %w", err)
	}
	return nil
}

// checksum is over the claims' canonical encoding (encoding/json sorts
// map keys).
func checksum(claims map[string]Prepared) (string, error) {
	if claims == nil {
		claims = map[string]Prepared{}
	}
	data, err := json.Marshal(claims)
	if err != nil {
		return "", fmt.Errorf("encode checkpoint: %w", err)
	}
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
