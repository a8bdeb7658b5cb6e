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
	"slices"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"tags.cncf.io/container-device-interface/pkg/parser"
	cdi "tags.cncf.io/container-device-interface/specs-go"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/driverstore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/dxcore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/setup/cdispec"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/atomicfile"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/cdiselect"
)

// CheckpointVersion is the format Checkpoint writes: version 3 adds each
// device's share and memory and each claim's metadata files. LoadCheckpoint
// also reads version 2, which has none of them, and version 1, whose
// claims lack Spec too.
const CheckpointVersion = 3

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
	// Spec is the spec as prepare wrote it: what SpecFile must hold while
	// the claim is prepared, whatever the host lists since (its vendor
	// variables depend on the other adapters). Nil only in a version 1
	// checkpoint, which did not record it (see AdoptSpec).
	Spec *cdi.Spec `json:"spec,omitempty"`
	// Metadata is each request's metadata file (MetadataFile) as prepare
	// wrote it, by request name.
	Metadata map[string]string `json:"metadata,omitempty"`
}

// SpecData is the bytes of the claim's spec file.
func (p Prepared) SpecData() ([]byte, error) {
	if p.Spec == nil {
		return nil, fmt.Errorf("claim %s/%s: the checkpoint records no spec", p.Namespace, p.Name)
	}
	return cdispec.Marshal(p.Spec)
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
	// ShareID is the share's ID when the claim shares the device with
	// others (consumable capacity), else "".
	ShareID string `json:"shareID,omitempty"`
	// Memory is the memory promised to the claim on the device, in bytes:
	// its share, or all of it when the claim has the device alone.
	Memory int64 `json:"memory,omitempty"`
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
// the newest three. It returns where the file went; an error beside a
// path means the file was moved and an old copy could not be removed.
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
	case file.Version < 1 || file.Version > CheckpointVersion:
		return nil, fmt.Errorf("version %d, this driver reads 1 to %d", file.Version, CheckpointVersion)
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
		if err := validPrepared(uid, file.Claims[uid], file.Version); err != nil {
			errs = append(errs, fmt.Errorf("claim %q: %w", uid, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return file.Claims, nil
}

// validPrepared checks an entry is one Prepare could have written in a
// checkpoint of version.
func validPrepared(uid string, p Prepared, version int) error {
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
		if d.ShareID != "" && ValidUID(d.ShareID) != nil || d.Memory < 0 {
			return fmt.Errorf("device %q: share %q of %d bytes", d.Device, d.ShareID, d.Memory)
		}
	}
	// Request names become file names.
	for req := range p.Metadata {
		if msgs := validation.IsDNS1123Label(req); len(msgs) > 0 {
			return fmt.Errorf("metadata of request %q: %s", req, msgs[0])
		}
	}
	switch {
	case version < 3 && (len(p.Metadata) > 0 || slices.ContainsFunc(p.Devices, func(d PreparedDevice) bool { return d.ShareID != "" || d.Memory != 0 })):
		return fmt.Errorf("a share or metadata in a version %d checkpoint", version)
	case version == 1 && p.Spec != nil:
		return errors.New("a spec in a version 1 checkpoint")
	case version == 1:
		return nil
	case p.Spec == nil:
		return errors.New("no spec")
	}
	return claimSpec(uid, p, p.Spec)
}

// claimSpec checks spec is one prepare could have written for the claim:
// its kind, one device per prepared device and no other, and what engines
// check when they load it.
func claimSpec(uid string, p Prepared, spec *cdi.Spec) error {
	if spec.Kind != CDIKind {
		return fmt.Errorf("spec of kind %q, not %s", spec.Kind, CDIKind)
	}
	var want, got []string
	for _, d := range p.Devices {
		if name := uid + "-" + d.Device; !slices.Contains(want, name) {
			want = append(want, name)
		}
	}
	for _, d := range spec.Devices {
		got = append(got, d.Name)
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		return fmt.Errorf("spec devices %v, not the claim's %v", got, want)
	}
	return cdispec.Validate(spec)
}

// AdoptSpec completes a claim of a version 1 checkpoint, which recorded no
// spec, with the spec its file holds now (data): the spec its running
// pods were given, provided it is one prepare could have written for it.
func AdoptSpec(uid string, p Prepared, data []byte) (Prepared, error) {
	var spec cdi.Spec
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&spec); err != nil {
		return p, fmt.Errorf("not a CDI spec: %w", err)
	}
	if err := claimSpec(uid, p, &spec); err != nil {
		return p, err
	}
	p.Spec = &spec
	return p, nil
}

// RebuildSpec completes a claim of a version 1 checkpoint whose spec file
// is gone or not the claim's: the spec prepare writes now for its devices'
// LUIDs on the host inv lists.
func RebuildSpec(uid string, p Prepared, inv *driverstore.Inventory, opt cdispec.Options) (Prepared, error) {
	var named []cdispec.Named
	for _, d := range p.Devices {
		luid, err := dxcore.ParseLUID(d.LUID)
		if err != nil || luid.Uint64() == 0 {
			return p, fmt.Errorf("device %s: LUID %q: the spec cannot be rebuilt: delete the pods using the claim", d.Device, d.LUID)
		}
		if name := uid + "-" + d.Device; !slices.ContainsFunc(named, func(n cdispec.Named) bool { return n.Name == name }) {
			named = append(named, cdispec.Named{Name: name, Selection: cdiselect.Selection{LUID: luid, Index: -1}})
		}
	}
	spec, err := cdispec.Transient(CDIKind, named, inv, opt)
	if err != nil {
		return p, err
	}
	p.Spec = spec
	return p, nil
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
