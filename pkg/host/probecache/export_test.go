package probecache

// EncodeUnchecked writes k and p as Save would, without validating them:
// the hostile-file tests make files Save refuses.
func EncodeUnchecked(k *Key, p *Probe) []byte { return encode(k, p) }

// Decode reads a file's content without validating it.
func Decode(data []byte) (*Key, *Probe, error) { return decode(data) }
