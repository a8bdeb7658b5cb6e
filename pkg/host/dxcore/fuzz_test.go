package dxcore

import (
	"encoding/binary"
	"testing"
	"unicode/utf8"
)

func FuzzDecodeRegistry(f *testing.F) {
	// Realistic replies: the size answer, the path answer in both host
	// spellings, a FAIL, and some broken ones.
	path := append(utf16le(`\SystemRoot\System32\DriverStore\FileRepository\nvltwi.inf_amd64_7b2a5c1c4e6f8d90`), 0, 0)
	f.Add(registryReply(0, regStatusBufferOverflow, uint32(len(path)), nil))
	f.Add(registryReply(len(path), regStatusSuccess, uint32(len(path)), path))
	dos := append(utf16le(`\\?\C:\WINDOWS\System32\DriverStore\FileRepository\u0398975.inf_amd64_cab3843582148687`), 0, 0)
	f.Add(registryReply(len(dos), regStatusSuccess, uint32(len(dos)), dos))
	f.Add(registryReply(0, regStatusFail, 0, nil))
	f.Add(registryReply(3, regStatusSuccess, 11, []byte{0x3d, 0xd8, 'a', 0, 0}))
	f.Add(registryReply(0, regStatusBufferOverflow, 0xffffffff, nil))
	f.Add(make([]byte, 544))
	f.Fuzz(func(t *testing.T, reply []byte) {
		value, need, err := decodeRegistry(reply)
		if err != nil {
			if value != "" || need != 0 {
				t.Errorf("error %v came with value %q need %d", err, value, need)
			}
			return
		}
		if need != 0 && (value != "" || need > maxRegistryValue) {
			t.Errorf("need %d with value %q", need, value)
		}
		payload := len(reply) - offRegOutput
		if claimed := int(binary.LittleEndian.Uint32(reply[offRegOutputSize:])); claimed < payload {
			payload = claimed // the value is output_value_size bytes, not the whole buffer
		}
		if n := utf8.RuneCountInString(value); n > payload/2 {
			t.Errorf("%d characters from a %d-byte payload", n, payload)
		}
		// UTF-8 never takes more than 3 bytes per UTF-16 unit.
		if len(value) > payload/2*3 {
			t.Errorf("%d bytes of string from a %d-byte payload", len(value), payload)
		}
		if !utf8.ValidString(value) {
			t.Errorf("invalid UTF-8 %q", value)
		}
	})
}

func FuzzDecodeDeviceIDs(f *testing.F) {
	reply := make([]byte, sizeofDeviceIDs)
	for i, v := range []uint32{0, 0x10de, 0x2520, 0x17aa, 0x3a5c, 0xa1, 5} {
		binary.LittleEndian.PutUint32(reply[4*i:], v)
	}
	f.Add(reply)
	f.Add(reply[:27])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		ids, err := decodeDeviceIDs(b)
		if (err != nil) != (len(b) < sizeofDeviceIDs) {
			t.Fatalf("%d bytes: err = %v", len(b), err)
		}
		if err != nil {
			return
		}
		if ids.Vendor != binary.LittleEndian.Uint32(b[4:]) || ids.Revision != binary.LittleEndian.Uint32(b[20:]) {
			t.Errorf("fields not at offsets 4..20: %+v", ids)
		}
	})
}

func FuzzDecodeAdapterInfos(f *testing.F) {
	b := make([]byte, 2*sizeofAdapterInfo)
	encodeAdapterInfos(b, []adapterInfo{{handle: 0x40000000, luid: LUID{Low: 0x1a1d77}}, {handle: 0x40000040, luid: LUID{Low: 0x4486d1}}})
	f.Add(b, uint32(2))
	f.Add(b[:25], uint32(64))
	f.Fuzz(func(t *testing.T, b []byte, n uint32) {
		infos := decodeAdapterInfos(b, n)
		if uint32(len(infos)) > n || len(infos)*sizeofAdapterInfo > len(b) {
			t.Errorf("%d entries from %d bytes and count %d", len(infos), len(b), n)
		}
	})
}

func FuzzDecodeUTF16(f *testing.F) {
	f.Add(utf16le("NVIDIA GeForce RTX 3060 Laptop GPU"))
	f.Add(append(utf16le("Intel(R) Arc(TM) Graphics"), 0, 0, 'x', 0))
	f.Add([]byte{0x3d, 0xd8, 0x80, 0xde, 0x3d})
	f.Fuzz(func(t *testing.T, b []byte) {
		s := decodeUTF16(b)
		if utf8.RuneCountInString(s) > len(b)/2 || !utf8.ValidString(s) {
			t.Errorf("decodeUTF16(% x) = %q", b, s)
		}
	})
}
