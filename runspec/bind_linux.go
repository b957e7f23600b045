package runspec

import (
	"golang.org/x/sys/unix"
)

// CheckBindSource is the host check of Options.BindSource on Linux: it
// opens p with openat2(O_PATH, RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS),
// so no component may be a symlink (the path checked is the path the
// runtime mounts), and refuses a socket or a device file. A path that does
// not exist or cannot be opened is refused too (fail closed). p should be
// absolute and clean.
func CheckBindSource(p string) error {
	fd, err := unix.Openat2(unix.AT_FDCWD, p, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		if err == unix.ELOOP {
			return errBindSource(p, "a component is a symlink")
		}
		return errBindSource(p, err.Error())
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return errBindSource(p, err.Error())
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFSOCK:
		return errBindSource(p, "a socket")
	case unix.S_IFCHR, unix.S_IFBLK:
		return errBindSource(p, "a device file")
	}
	return nil
}
