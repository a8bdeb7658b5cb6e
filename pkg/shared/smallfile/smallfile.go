package smallfile

import (
	"errors"
	"io/fs"

	"golang.org/x/sys/unix"
)

// ErrTooLarge is the error (inside a *fs.PathError) for a file longer than
// the limit its reader set.
var ErrTooLarge = errors.New("file too large")

// Read returns the content of the file at path, which must be at most limit
// bytes long. Errors are *fs.PathError, so errors.Is(err, fs.ErrNotExist)
// and the like hold.
func Read(path string, limit int) ([]byte, error) {
	return ReadVetted(path, limit, 0, nil)
}

// ReadVetted is Read for a file its caller must vet before trusting it
// (owner, mode, type): path is opened with flags added to O_RDONLY and
// O_CLOEXEC (O_NOFOLLOW, O_NONBLOCK against a FIFO), and vet, when not
// nil, sees fstat's answer for the open file; its error is returned as it
// is and nothing is read.
func ReadVetted(path string, limit, flags int, vet func(*unix.Stat_t) error) ([]byte, error) {
	fd, err := open(path, flags)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		if vet != nil {
			return nil, &fs.PathError{Op: "stat", Path: path, Err: err}
		}
		st.Size = 0
	}
	if vet != nil {
		if err := vet(&st); err != nil {
			return nil, err
		}
	}
	return ReadFD(fd, path, st.Size, limit)
}

// ReadFD reads what is left of the open file fd (named path in errors),
// which must be at most limit bytes; size is what fstat said of it, 0 if
// unknown.
func ReadFD(fd int, path string, size int64, limit int) ([]byte, error) {
	// One buffer of the size fstat reports (and a byte to see the end):
	// growing one from a small start, as os.ReadFile does for /proc, is a
	// fresh allocation per doubling. /proc files report 0 and start at 512.
	n := 512
	if size > 0 {
		n = int(min(size, int64(limit))) + 1
	}
	buf := make([]byte, 0, n)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := unix.Read(fd, buf[len(buf):cap(buf)])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "read", Path: path, Err: err}
		}
		buf = buf[:len(buf)+n]
		if len(buf) > limit {
			return nil, &fs.PathError{Op: "read", Path: path, Err: ErrTooLarge}
		}
		if n == 0 {
			return buf, nil
		}
	}
}

func open(path string, flags int) (int, error) {
	for {
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC|flags, 0)
		if err != unix.EINTR {
			return fd, err
		}
	}
}
