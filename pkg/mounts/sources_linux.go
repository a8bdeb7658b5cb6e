package mounts

import "golang.org/x/sys/unix"

// bindAttrs are the attributes of every read-only bind of a host path
// (Bind and BindFile steps).
const bindAttrs = unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV

// Sources are the host paths a plan binds, cloned into detached mounts
// ahead of Apply.
//
// Why: on WSL the lib dir and the driver store are 9p mounts of the
// Windows host, and the clone's path walk is a round trip to it for each
// driver store folder. Started as soon as the plan is known, the clones
// wait on the host while the hook does its other work (the log, the device
// cgroup, entering the mount namespace), instead of one after the other in
// Apply. A detached mount is in no namespace, so one cloned in the hook's
// namespace is attached in the container's as one cloned there would be;
// runc hands mount sources to the container's init the same way.
//
// A clone that failed is not reported: Apply clones that source again
// itself and reports what goes wrong then, as it would have without
// Sources. Nothing is ever attached until Apply does it, so a Sources
// dropped (Close) leaves nothing mounted anywhere.
type Sources struct {
	// pending holds each source's clone, by host path: a descriptor of
	// the detached mount, or -1.
	pending map[string]chan int
}

// CloneSources starts cloning the source of each Bind and BindFile step,
// each in a goroutine of its own, with the attributes Apply would give it,
// and returns without waiting. The caller must Close the result.
func CloneSources(steps []Step) *Sources {
	s := &Sources{pending: map[string]chan int{}}
	for _, st := range steps {
		if st.Kind != Bind && st.Kind != BindFile {
			continue
		}
		if _, ok := s.pending[st.Source]; ok {
			continue
		}
		// Buffered: the goroutine never waits on a reader.
		done := make(chan int, 1)
		s.pending[st.Source] = done
		go func(source string) { done <- cloneTree(source, bindAttrs) }(st.Source)
	}
	return s
}

// cloneTree clones the host path source into a detached mount with attrs
// set, or returns -1.
func cloneTree(source string, attrs uint64) int {
	tree, err := unix.OpenTree(unix.AT_FDCWD, source, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return -1
	}
	if err := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH, &unix.MountAttr{Attr_set: attrs}); err != nil {
		unix.Close(tree)
		return -1
	}
	return tree
}

// take waits for the clone of source and hands its descriptor over to the
// caller, or returns -1 when there is none (none started, it failed, or it
// was taken before). A nil Sources has none.
func (s *Sources) take(source string) int {
	if s == nil {
		return -1
	}
	done, ok := s.pending[source]
	if !ok {
		return -1
	}
	delete(s.pending, source)
	return <-done
}

// Close waits for the clones not taken and closes them: a detached mount
// goes away with its last descriptor.
func (s *Sources) Close() {
	if s == nil {
		return
	}
	for source, done := range s.pending {
		if tree := <-done; tree >= 0 {
			unix.Close(tree)
		}
		delete(s.pending, source)
	}
}
