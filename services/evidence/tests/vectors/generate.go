//go:build ignore

// Writes the expected outputs of the golden vectors with Go's own encoding/json and
// crypto/ed25519, independently of the Rust implementation under test.
//
// For every <name>/input.json below this directory it writes, next to it:
//
//	canonical.json  the canonical bytes (no trailing newline)
//	signature.txt   base64 Ed25519 signature of the canonical bytes with test.key
//	id.txt          the CLI's default envelope id
//	signed.json     the envelope with that signature, as json.Marshal writes it
//
// Run from this directory with TZ=UTC: `TZ=UTC go run generate.go`.
//
// The types follow the protocol description (docs/design/envelopes.md), not any
// implementation.
package main

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

type subjectRef struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
}

type provenance struct {
	Collector  string    `json:"collector"`
	DetectedAt time.Time `json:"detectedAt"`
}

type observation struct {
	Kind       string          `json:"kind"`
	Subject    subjectRef      `json:"subject"`
	Outcome    string          `json:"outcome"`
	Value      json.RawMessage `json:"value,omitempty"`
	Provenance provenance      `json:"provenance"`
}

type evidenceSet struct {
	Subject      subjectRef
	ContractRef  string
	Source       string
	ObservedAt   time.Time
	Observations []observation
}

type producer struct {
	ID      string `json:"id"`
	Version string `json:"version,omitempty"`
	KeyID   string `json:"keyId"`
}

type signature struct {
	Algorithm string `json:"algorithm"`
	Value     string `json:"value"`
}

type envelope struct {
	APIVersion  string      `json:"apiVersion"`
	Kind        string      `json:"kind"`
	ID          string      `json:"id"`
	Producer    producer    `json:"producer"`
	Sequence    uint64      `json:"sequence"`
	IssuedAt    time.Time   `json:"issuedAt"`
	ExpiresAt   time.Time   `json:"expiresAt"`
	EvidenceSet evidenceSet `json:"evidenceSet"`
	Signature   *signature  `json:"signature,omitempty"`
}

func canonical(e envelope) []byte {
	e.Signature = nil
	raw, err := json.Marshal(e)
	check(err)
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var tree any
	check(dec.Decode(&tree))
	out, err := json.Marshal(tree)
	check(err)
	return out
}

func defaultID(e envelope) string {
	set, err := json.Marshal(e.EvidenceSet)
	check(err)
	sum := sha256.Sum256(set)
	content := "sha256:" + hex.EncodeToString(sum[:])
	h := sha256.New()
	var n [8]byte
	for i, part := range []string{e.APIVersion, e.Producer.ID, "", content} {
		if i == 2 {
			binary.BigEndian.PutUint64(n[:], e.Sequence)
			h.Write(n[:])
			continue
		}
		binary.BigEndian.PutUint64(n[:], uint64(len(part)))
		h.Write(n[:])
		h.Write([]byte(part))
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

func check(err error) {
	if err != nil {
		panic(err)
	}
}

func main() {
	seedText, err := os.ReadFile("test.key")
	check(err)
	seed, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(seedText)))
	check(err)
	key := ed25519.NewKeyFromSeed(seed)
	check(os.WriteFile("test.pub", []byte(base64.StdEncoding.EncodeToString(key.Public().(ed25519.PublicKey))+"\n"), 0o644))
	inputs, err := filepath.Glob("*/input.json")
	check(err)
	for _, input := range inputs {
		dir := filepath.Dir(input)
		data, err := os.ReadFile(input)
		check(err)
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		var e envelope
		check(dec.Decode(&e))
		for i := range e.EvidenceSet.Observations {
			if e.EvidenceSet.Observations[i].Outcome != "Observed" {
				e.EvidenceSet.Observations[i].Value = nil
			}
		}
		msg := canonical(e)
		sig := base64.StdEncoding.EncodeToString(ed25519.Sign(key, msg))
		e.Signature = &signature{Algorithm: "Ed25519", Value: sig}
		signed, err := json.Marshal(e)
		check(err)
		check(os.WriteFile(filepath.Join(dir, "canonical.json"), msg, 0o644))
		check(os.WriteFile(filepath.Join(dir, "signature.txt"), []byte(sig+"\n"), 0o644))
		check(os.WriteFile(filepath.Join(dir, "id.txt"), []byte(defaultID(e)+"\n"), 0o644))
		check(os.WriteFile(filepath.Join(dir, "signed.json"), signed, 0o644))
		fmt.Println(dir)
	}
}
