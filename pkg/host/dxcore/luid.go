package dxcore

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseLUID reads a LUID as LUID.String prints it ("0x4486d1"), as
// "0x" with up to 16 hex digits, or as a decimal number, the forms tools
// print the packed 64-bit value in.
func ParseLUID(s string) (LUID, error) {
	var v uint64
	var err error
	if hex, ok := strings.CutPrefix(strings.ToLower(s), "0x"); ok {
		if hex == "" || len(hex) > 16 {
			return LUID{}, fmt.Errorf("parse LUID %q: want 0x and 1 to 16 hex digits, or a decimal number", s)
		}
		v, err = strconv.ParseUint(hex, 16, 64)
	} else {
		v, err = strconv.ParseUint(s, 10, 64)
	}
	if err != nil {
		return LUID{}, fmt.Errorf("parse LUID %q: want 0x and 1 to 16 hex digits, or a decimal number", s)
	}
	return LUID{Low: uint32(v), High: int32(uint32(v >> 32))}, nil
}
