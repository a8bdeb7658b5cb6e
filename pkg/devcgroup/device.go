package devcgroup

import "fmt"

// Device is one device node as a device cgroup identifies it.
type Device struct {
	Type  rune // 'c' (character) or 'b' (block)
	Major int64
	Minor int64
}

// String is the device in devices.allow form without the access: "c 10:63".
func (d Device) String() string {
	return fmt.Sprintf("%c %d:%d", d.Type, d.Major, d.Minor)
}

func (d Device) validate() error {
	if d.Type != 'c' && d.Type != 'b' {
		return fmt.Errorf("device %s: type must be 'c' or 'b'", d)
	}
	// A device number has 12 major and 20 minor bits; no wildcards here, as
	// exactly one device is to be allowed.
	if d.Major < 0 || d.Major >= 1<<12 || d.Minor < 0 || d.Minor >= 1<<20 {
		return fmt.Errorf("device %s: major must be in [0, 4095] and minor in [0, 1048575]", d)
	}
	return nil
}
