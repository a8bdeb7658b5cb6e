package dxg

import "testing"

// TestRequestNumbers recomputes each number from _IOWR('G', nr, size) so a
// typo in a constant cannot agree with itself.
func TestRequestNumbers(t *testing.T) {
	iowr := func(nr, size uint32) uint32 { return 3<<30 | size<<16 | 'G'<<8 | nr }
	tests := []struct {
		name string
		got  uint32
		nr   uint32
		size uint32
	}{
		{"OPENADAPTERFROMLUID", LX_DXOPENADAPTERFROMLUID, 0x01, sizeOpenAdapterFromLUID},
		{"QUERYADAPTERINFO", LX_DXQUERYADAPTERINFO, 0x09, sizeQueryAdapterInfo},
		{"ENUMADAPTERS2", LX_DXENUMADAPTERS2, 0x14, sizeEnumAdapters2},
		{"CLOSEADAPTER", LX_DXCLOSEADAPTER, 0x15, sizeCloseAdapter},
		{"ENUMADAPTERS3", LX_DXENUMADAPTERS3, 0x3e, sizeEnumAdapters3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if want := iowr(tt.nr, tt.size); tt.got != want {
				t.Errorf("request = %#x, want %#x", tt.got, want)
			}
			if n := RequestName(tt.got); n != tt.name {
				t.Errorf("RequestName = %q, want %q", n, tt.name)
			}
		})
	}
}
