// Command torchwood-v0.6.1 reads a live `otel-route-shadow serve` with filippo.io/torchwood v0.6.1's Client
// (TileFetcher, Entries), the release the witness tests build litewitness from, and authenticates every
// entry of every published checkpoint. It is its own module because ../ (the interop program) needs v0.9.0
// (ParsePolicy, VerifyProof) and one module holds one version; Go cannot share a package main across
// modules, so this file is the entries check only, kept minimal: ../serve.go's torchwoodEntries against
// v0.6.1's API, whose Entries may stop before a trailing partial data tile and is resumed from where it
// stopped. Input: the JSON file tests/test_serve_interop.py gives ../ (verifier, serve cases). Output: one
// line per check; exit status 1 when any check does not come out as the input expects.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"filippo.io/torchwood"
	"golang.org/x/mod/sumdb/note"
)

type serveCase struct {
	Name   string   `json:"name"`
	URL    string   `json:"url"` // the log's prefix, ending in /
	Chain  string   `json:"chain"`
	Notes  []string `json:"notes"`  // every published checkpoint, oldest first
	Expect []bool   `json:"expect"` // per note: must the check succeed
}

type input struct {
	Verifier string      `json:"verifier"`
	Serve    []serveCase `json:"serve"`
}

func main() {
	data, err := os.ReadFile(os.Args[1])
	must(err)
	var in input
	must(json.Unmarshal(data, &in))
	verifier, err := note.NewVerifier(in.Verifier)
	must(err)
	verifiers := note.VerifierList(verifier)
	checks, failures := 0, 0
	for _, c := range in.Serve {
		data, err := os.ReadFile(c.Chain)
		must(err)
		lines := bytes.Split(data, []byte("\n"))
		for i, text := range c.Notes {
			n, err := note.Open([]byte(text), verifiers)
			must(err)
			cp, err := torchwood.ParseCheckpoint(n.Text)
			must(err)
			err = entries(c.URL, cp, lines)
			ok := (err == nil) == c.Expect[i]
			fmt.Printf("%s %s: torchwood v0.6.1 Client authenticates all %d entries of checkpoint %d: ok=%v (expected %v): %v\n",
				map[bool]string{true: "ok  ", false: "FAIL"}[ok], c.Name, cp.N, i, err == nil, c.Expect[i], err)
			checks++
			if !ok {
				failures++
			}
		}
	}
	fmt.Printf("%d checks, %d failed\n", checks, failures)
	if failures > 0 {
		os.Exit(1)
	}
}

// entries reads every entry of the checkpoint's tree with torchwood's Client (each entry checked against
// the level-0 tiles it authenticated) and compares them with the chain's lines. An Entries call that
// yields nothing before the tree's end is an error.
func entries(base string, cp torchwood.Checkpoint, lines [][]byte) error {
	fetcher, err := torchwood.NewTileFetcher(base, torchwood.WithConcurrencyLimit(4))
	if err != nil {
		return err
	}
	client, err := torchwood.NewClient(fetcher, torchwood.WithTimeout(3*time.Second))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	count := int64(0)
	for count < cp.N {
		before := count
		for i, entry := range client.Entries(ctx, cp.Tree, count) {
			if i != count {
				return fmt.Errorf("entry %d came after %d entries", i, count)
			}
			if !bytes.Equal(entry, lines[i]) {
				return fmt.Errorf("entry %d is not line %d of the chain", i, i)
			}
			count++
		}
		if err := client.Err(); err != nil {
			return err
		}
		if count == before {
			return fmt.Errorf("%d entries, not %d", count, cp.N)
		}
	}
	return nil
}

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "interop:", err)
		os.Exit(2)
	}
}
