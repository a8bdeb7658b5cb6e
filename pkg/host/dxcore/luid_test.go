package dxcore

import "testing"

func TestParseLUID(t *testing.T) {
	tests := []struct {
		in      string
		want    LUID
		wantErr bool
	}{
		{"0x4486d1", LUID{Low: 0x4486d1}, false},
		{"0X4486D1", LUID{Low: 0x4486d1}, false},
		{"0x000000000004486d1", LUID{}, true}, // 17 digits
		{"0x00000000004486d1", LUID{Low: 0x4486d1}, false},
		{"0x1000000002", LUID{Low: 2, High: 0x10}, false},
		{"0xffffffff80000000", LUID{Low: 0x80000000, High: -1}, false},
		{"4490961", LUID{Low: 0x4486d1}, false},
		{"18446744073709551615", LUID{Low: 0xffffffff, High: -1}, false},
		{"0", LUID{}, false},
		{"", LUID{}, true},
		{"0x", LUID{}, true},
		{"0xg1", LUID{}, true},
		{"-1", LUID{}, true},
		{"+1", LUID{}, true},
		{"1_000", LUID{}, true},
		{"18446744073709551616", LUID{}, true},
		{"4486d1", LUID{}, true},
		{" 0x1", LUID{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseLUID(tt.in)
			if tt.wantErr {
				want := `parse LUID "` + tt.in + `": want 0x and 1 to 16 hex digits, or a decimal number`
				if err == nil || err.Error() != want {
					t.Fatalf("ParseLUID(%q) = %v, %v; want error %q", tt.in, got, err, want)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseLUID(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestLUIDStringRoundTrip(t *testing.T) {
	for _, l := range []LUID{{}, {Low: 0x4486d1}, {Low: 1, High: 1}, {Low: 0xffffffff, High: -1}, {High: -0x80000000}} {
		t.Run(l.String(), func(t *testing.T) {
			got, err := ParseLUID(l.String())
			if err != nil || got != l {
				t.Errorf("ParseLUID(%q) = %v, %v; want %v", l.String(), got, err, l)
			}
		})
	}
}

func FuzzParseLUID(f *testing.F) {
	for _, s := range []string{"0x4486d1", "4490961", "0xffffffffffffffff", "", "0x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l, err := ParseLUID(s)
		if err != nil {
			return
		}
		again, err := ParseLUID(l.String())
		if err != nil || again != l {
			t.Errorf("%q -> %v -> %q -> %v, %v", s, l, l.String(), again, err)
		}
	})
}

func TestACPIID(t *testing.T) {
	tests := []struct {
		name string
		ids  PCIIDs
		want string
		str  string // String: what info and doctor print
	}{
		{"snapdragon gpu", PCIIDs{Vendor: 0x4D4F4351, Device: 0x36334330}, "QCOM0C36", "QCOM0C36"},
		{"snapdragon npu", PCIIDs{Vendor: 0x4D4F4351, Device: 0x41304430}, "QCOM0D0A", "QCOM0D0A"},
		{"pci", PCIIDs{Vendor: 0x10de, Device: 0x2520}, "", "10de:2520"},
		{"letters in the vendor only", PCIIDs{Vendor: 0x4D4F4351, Device: 0x2520}, "", "4d4f4351:2520"},
		{"lower case is no ACPI id", PCIIDs{Vendor: 0x6d6f6371, Device: 0x36334330}, "", "6d6f6371:36334330"},
		{"zero", PCIIDs{}, "", "0000:0000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.ids.ACPIID(); got != tt.want {
				t.Errorf("ACPIID() = %q, want %q", got, tt.want)
			}
			if got := tt.ids.String(); got != tt.str {
				t.Errorf("String() = %q, want %q", got, tt.str)
			}
		})
	}
}
