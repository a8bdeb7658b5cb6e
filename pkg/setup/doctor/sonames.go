package doctor

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/probecache"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/wsl"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/ldcache"
)

// checkFirstStart says what the first container start after a boot will
// read of the lib dir: with the SONAMEs kept (soname_cache) it stats the
// libraries the file knows and reads only the others. Never a failure,
// and nothing is written: a missing or refused file is what the next
// start writes, where the directory exists (the hook never makes it).
func checkFirstStart(o Options, r *Report) {
	const check = "first start"
	if o.NoSonameCache {
		r.add(check, OK, "", "soname_cache is \"\" in the configuration: the first container start after each boot reads every library of %s", o.LibDir)
		return
	}
	if _, err := os.Stat(o.SonameCache); errors.Is(err, fs.ErrNotExist) {
		r.add(check, Warn, fmt.Sprintf("sudo mkdir -m 0755 %s (the .deb makes it)", shellArg(o.SonameCache)),
			"%s does not exist: the first container start after each boot reads every library of %s, as the hook never makes it", o.SonameCache, o.LibDir)
		return
	}
	path := probecache.SonamesPath(o.SonameCache, o.LibDir)
	memo, err := probecache.LoadSonames(path, o.LibDir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		r.add(check, OK, "", "no SONAMEs kept in %s yet: the next container start keeps them", o.SonameCache)
		return
	case err != nil:
		r.add(check, Warn, "", "%v: the first container start after a boot reads every library of %s, then replaces the file", err, o.LibDir)
		return
	}
	c := &countingMemo{Memo: memo}
	if _, err := ldcache.ScanDirMemo(o.LibDir, wsl.LibDir, c); err != nil {
		r.add(check, Warn, "", "scan %s: %v", o.LibDir, err)
		return
	}
	if c.read == 0 {
		r.add(check, OK, "", "%s knows all %d libraries of %s as they are: the first container start after a boot stats them and reads none", path, c.files, o.LibDir)
		return
	}
	r.add(check, OK, "", "%s knows %d of the %d libraries of %s as they are: the first container start after a boot reads the other %d and keeps them", path, c.files-c.read, c.files, o.LibDir, c.read)
}

// countingMemo counts the files a scan kept and those it had to read: a
// scan asks Soname at most once per file, before it keeps the file.
type countingMemo struct {
	ldcache.Memo
	files, read int
	known       bool // the file being scanned was answered
}

func (c *countingMemo) Soname(name string, id ldcache.FileID) (string, bool, bool) {
	soname, lib, known := c.Memo.Soname(name, id)
	c.known = known
	return soname, lib, known
}

func (c *countingMemo) Keep(name string, id ldcache.FileID, soname string, lib bool) {
	c.files++
	if !c.known {
		c.read++
	}
	c.known = false
	c.Memo.Keep(name, id, soname, lib)
}
