package driverstore

import "testing"

func TestVendorOf(t *testing.T) {
	tests := []struct {
		id   uint32
		want Vendor
	}{
		{0x10de, NVIDIA},
		{0x1002, AMD},
		{0x1022, AMD},
		{0x8086, Intel},
		{0x1414, Microsoft},
		{0x5143, Qualcomm},     // Qualcomm's PCI id (pci.ids)
		{0x4D4F4351, Qualcomm}, // "QCOM": what Windows on Arm reports for its ACPI GPU and NPU
		{0x4351, Unknown},      // the low half of "QCOM" alone is no one's
		{0x17cb, Unknown},      // Qualcomm's modems and Wi-Fi, never a WSL adapter
		{0, Unknown},
		{0xffffffff, Unknown},
	}
	for _, tt := range tests {
		if got := VendorOf(tt.id); got != tt.want {
			t.Errorf("VendorOf(%#x) = %q, want %q", tt.id, got, tt.want)
		}
	}
}
