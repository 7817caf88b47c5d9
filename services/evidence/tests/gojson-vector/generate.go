//go:build ignore

// Writes the golden vector of Go's string escaping with Go's own encoding/json, independently
// of the Rust encoder under test (`pacto_evidence::gojson`, docs/design/envelopes.md#canonical-bytes).
//
//	valid.txt     every control character U+0000..U+001F, DEL, '"', '\', '/', '<', '>', '&',
//	              U+2028, U+2029, U+FFFD and other non-ASCII text (valid UTF-8)
//	valid.json    json.Marshal of valid.txt as a string (HTML escaping on, Go's default)
//	invalid.bin   valid.txt followed by invalid UTF-8: a lone 0xFF, a truncated sequence, an
//	              encoded surrogate, an overlong encoding and a lone continuation byte
//	invalid.json  json.Marshal of invalid.bin as a string
//
// Run from this directory: `go run generate.go` (written with go1.26.8; the rules have held
// since Go 1.22, which started writing U+0008 and U+000C as \b and \f).
package main

import (
	"encoding/json"
	"os"
)

func main() {
	valid := []byte{}
	for c := 0; c < 0x20; c++ {
		valid = append(valid, byte(c))
	}
	valid = append(valid, []byte("\x7f\"\\/<>&a\u2028b\u2029c\ufffdé€😀")...)
	invalid := append(append([]byte{}, valid...),
		0xff, 'x', 0xe2, 0x82, 'y', 0xed, 0xa0, 0x80, 'z', 0xc0, 0xaf, 0x80)
	write("valid.txt", valid)
	write("valid.json", marshal(string(valid)))
	write("invalid.bin", invalid)
	write("invalid.json", marshal(string(invalid)))
}

func marshal(s string) []byte {
	out, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	return out
}

func write(name string, data []byte) {
	if err := os.WriteFile(name, data, 0o644); err != nil {
		panic(err)
	}
}
