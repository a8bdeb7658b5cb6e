package dra

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

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

// CheckpointReadError is a checkpoint that exists and could not be read
// (EACCES, EIO, EMFILE...): it may well be intact, so it is neither
// trusted nor replaced; the caller keeps it and reads it again later.
type CheckpointReadError struct {
	Path string
	Err  error
}

func (e *CheckpointReadError) Error() string {
	return fmt.Sprintf("read checkpoint %s: %v", e.Path, e.Err)
}

func (e *CheckpointReadError) Unwrap() error { return e.Err }

// CorruptCheckpointError is a checkpoint that was read and is not one
// this driver wrote as it is: not JSON, a bad checksum, another driver or
// version, an entry prepare would never write, not a regular file, too
// large. Nothing of it is trusted; the caller moves it aside
// (MoveCheckpointAside) and starts with no claims.
type CorruptCheckpointError struct {
	Path string
	Err  error
}

func (e *CorruptCheckpointError) Error() string {
	return fmt.Sprintf("checkpoint %s is corrupt: %v", e.Path, e.Err)
}

func (e *CorruptCheckpointError) Unwrap() error { return e.Err }

// LoadCheckpoint reads path. A missing file is an empty checkpoint. A file
// that cannot be read is a *CheckpointReadError; one that is not what this
// driver wrote (unknown version or driver, bad checksum, a claim UID,
// device or CDI name that prepare would never write, a spec file outside
// the CDI dir) is a *CorruptCheckpointError and never partly trusted.
func LoadCheckpoint(path string) (*Checkpoint, error) {
	return loadCheckpoint(path, func(name string) (fs.File, error) { return os.Open(name) })
}

// loadCheckpoint is LoadCheckpoint with open injected: tests make it fail
// as a disk does.
func loadCheckpoint(path string, open func(string) (fs.File, error)) (*Checkpoint, error) {
	f, err := open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return &Checkpoint{Claims: map[string]Prepared{}}, nil
	}
	if err != nil {
		return nil, &CheckpointReadError{path, err}
	}
	defer f.Close()
	fi, err := f.Stat()
	switch {
	case err != nil:
		return nil, &CheckpointReadError{path, err}
	case !fi.Mode().IsRegular():
		return nil, &CorruptCheckpointError{path, errors.New("not a regular file")}
	case fi.Size() > maxCheckpoint:
		return nil, &CorruptCheckpointError{path, fmt.Errorf("%d bytes, more than the %d a checkpoint can hold", fi.Size(), maxCheckpoint)}
	}
	// A file cut short while read (ErrUnexpectedEOF) is a read error too:
	// the driver replaces it only by rename, so reading again settles it.
	data := make([]byte, fi.Size())
	if _, err := io.ReadFull(f, data); err != nil {
		return nil, &CheckpointReadError{path, err}
	}
	claims, err := decodeCheckpoint(data)
	if err != nil {
		return nil, &CorruptCheckpointError{path, err}
	}
	return &Checkpoint{Claims: claims}, nil
}

// keepCorrupt is how many moved-aside checkpoints MoveCheckpointAside
// keeps: enough to look at what went wrong, not a growing pile.
const keepCorrupt = 3

// MoveCheckpointAside renames a corrupt checkpoint to
// path.corrupt-<UTC time> (never over another file) so the driver's next
// save does not overwrite it, and removes the oldest such files beyond
// the newest three. It returns where the file went.
func MoveCheckpointAside(path string, now time.Time) (string, error) {
	to := path + corruptSuffix + now.UTC().Format("20060102T150405.000000000Z")
	if _, err := os.Lstat(to); !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("move checkpoint aside: %s exists", to)
	}
	if err := os.Rename(path, to); err != nil {
		return "", fmt.Errorf("move checkpoint aside: %w", err)
	}
	old, err := corruptCopies(path)
	if err != nil {
		return to, fmt.Errorf("list moved-aside checkpoints: %w", err)
	}
	var errs []error
	for _, name := range old[:max(len(old)-keepCorrupt, 0)] {
		errs = append(errs, os.Remove(name))
	}
	return to, errors.Join(errs...)
}

const corruptSuffix = ".corrupt-"

// corruptCopies lists the moved-aside copies of path, oldest first (the
// names sort by time).
func corruptCopies(path string) ([]string, error) {
	entries, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		return nil, err
	}
	var out []string
	prefix := filepath.Base(path) + corruptSuffix
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) {
			out = append(out, filepath.Join(filepath.Dir(path), e.Name()))
		}
	}
	sort.Strings(out)
	return out, nil
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
