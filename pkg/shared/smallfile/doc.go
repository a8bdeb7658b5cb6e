// Package smallfile reads small whole files (the hook's configuration, a
// bundle's config.json, /proc entries) with plain system calls.
//
// os.Open hands every file it opens to the Go runtime's network poller:
// for a regular file that is four fcntl calls and a refused epoll_ctl per
// file, and the poller's own setup (an epoll instance, an eventfd) at the
// first. A hook reads a few small files once and exits; it needs none of
// it.
package smallfile
