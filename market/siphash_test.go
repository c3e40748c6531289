package market

import "testing"

// TestSipHash checks sipHash24 against the reference vectors of the SipHash
// paper (key 00 01 … 0f, message 00 01 … of growing length), reading the
// first message byte as the prefix. The vectors are the paper's output
// bytes read as a little-endian integer.
func TestSipHash(t *testing.T) {
	k0, k1 := uint64(0x0706050403020100), uint64(0x0f0e0d0c0b0a0908)
	want := map[int]uint64{
		1:  0x74f839c593dc67fd,
		2:  0x0d6c8009d9a94f5a,
		8:  0x93f5f5799a932462,
		15: 0xa129ca6149be45e5,
		16: 0x3f2acc7f57c29bdb,
	}
	msg := make([]byte, 64)
	for i := range msg {
		msg[i] = byte(i)
	}
	for n, w := range want {
		if got := sipHash24(k0, k1, msg[0], string(msg[1:n])); got != w {
			t.Errorf("length %d: %#x, want %#x", n, got, w)
		}
	}
}
