// Command torchwood-v0.10.0 checks ML-DSA-44 cosignatures (c2sp.org/tlog-cosignature v1.1.0-rc.1, key type
// 0x06, the subtree/v1 message) both ways with filippo.io/torchwood v0.10.0, the first release that has them.
// It is its own module because v0.10.0 needs Go 1.27 (GOTOOLCHAIN=go1.27.3 from the Go module proxy) while
// ../ stays on the machine's Go. Input: a JSON file (tests/test_tlog_cosignature_mldsa.py writes it). It
// derives the witness key from the seed, checks that its vkey is the one otel-route-shadow printed, opens
// every note otel-route-shadow's test cosigner cosigned and compares the outcome with the one expected, and
// checks the subtree lines. Output: one line per check, then one JSON line with what torchwood signed: a
// cosignature line per note to sign and a line per subtree. Exit status 1 when any check fails.
package main

import (
	"crypto/mldsa"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"slices"

	"filippo.io/torchwood"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

type cosignedNote struct {
	Note     string `json:"note"`
	Verified bool   `json:"verified"` // whether otel-route-shadow counted the witness's cosignature
}

type subtree struct {
	Origin string `json:"origin"`
	Start  int64  `json:"start"`
	End    int64  `json:"end"`
	Hash   string `json:"hash"` // base64
	Line   string `json:"line"` // the line otel-route-shadow's test cosigner made, "" for none
	Valid  bool   `json:"valid"`
}

type input struct {
	LogVerifier string         `json:"log_verifier"`
	Seed        string         `json:"seed"` // hex, 32 bytes
	Name        string         `json:"name"`
	Vkey        string         `json:"vkey"`
	Cosigned    []cosignedNote `json:"cosigned"`
	Sign        []string       `json:"sign"` // signed notes for torchwood to cosign
	Subtrees    []subtree      `json:"subtrees"`
}

type output struct {
	Vkey     string   `json:"vkey"`
	Lines    []string `json:"lines"`    // per note to sign: torchwood's cosignature line
	Subtrees []string `json:"subtrees"` // per subtree: torchwood's SignSubtree line
}

func main() {
	data, err := os.ReadFile(os.Args[1])
	must(err)
	var in input
	must(json.Unmarshal(data, &in))
	seed, err := hex.DecodeString(in.Seed)
	must(err)
	key, err := mldsa.NewPrivateKey(mldsa.MLDSA44(), seed)
	must(err)
	signer, err := torchwood.NewCosignatureSigner(in.Name, key)
	must(err)
	logVerifier, err := note.NewVerifier(in.LogVerifier)
	must(err)
	parsed, err := torchwood.NewCosignatureVerifier(in.Vkey)
	checks, failures := 0, 0
	check := func(what string, ok bool) {
		checks++
		if !ok {
			failures++
		}
		fmt.Printf("%s %s\n", map[bool]string{true: "ok  ", false: "FAIL"}[ok], what)
	}
	check("torchwood parses the vkey otel-route-shadow printed", err == nil)
	check("the vkey is the one torchwood derives from the seed", signer.Verifier().String() == in.Vkey)
	if err != nil {
		parsed = signer.Verifier()
	}
	verifiers := note.VerifierList(logVerifier, parsed)
	for i, c := range in.Cosigned {
		n, err := note.Open([]byte(c.Note), verifiers)
		counted := err == nil && slices.ContainsFunc(n.Sigs, func(s note.Signature) bool {
			return s.Name == in.Name && s.Hash == parsed.KeyHash()
		})
		check(fmt.Sprintf("cosigned note %d: torchwood counts the cosignature: %v (otel-route-shadow: %v; %v)",
			i, counted, c.Verified, err), counted == c.Verified)
	}
	out := output{Vkey: signer.Verifier().String()}
	for _, text := range in.Sign {
		n, err := note.Open([]byte(text), note.VerifierList(logVerifier))
		must(err)
		signed, err := note.Sign(n, signer)
		must(err)
		out.Lines = append(out.Lines, string(signed[len(text):]))
	}
	for i, s := range in.Subtrees {
		raw, err := base64.StdEncoding.DecodeString(s.Hash)
		must(err)
		var hash tlog.Hash
		copy(hash[:], raw)
		if s.Line != "" {
			ok := parsed.VerifySubtree(s.Origin, s.Start, s.End, hash, []byte(s.Line))
			check(fmt.Sprintf("subtree %d [%d, %d): torchwood verifies the line: %v (expected %v)",
				i, s.Start, s.End, ok, s.Valid), ok == s.Valid)
		}
		line, err := signer.SignSubtree(s.Origin, s.Start, s.End, hash)
		must(err)
		out.Subtrees = append(out.Subtrees, string(line))
	}
	fmt.Printf("%d checks, %d failed\n", checks, failures)
	encoded, err := json.Marshal(out)
	must(err)
	fmt.Println(string(encoded))
	if failures > 0 {
		os.Exit(1)
	}
}

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
}
