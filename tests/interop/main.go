// Command interop checks otel-route-shadow's checkpoints, signatures and proofs with Go's
// golang.org/x/mod/sumdb/note and golang.org/x/mod/sumdb/tlog, and its witness formats (cosignatures,
// policies, receipts) with filippo.io/torchwood (witness.go), and reads a live `otel-route-shadow serve`
// with torchwood's Client and x/mod's TileHashReader over HTTP (serve.go): code this project did not write.
// torchwood is at v0.9.0, the first release with ParsePolicy and VerifyProof (v0.10.0 needs Go 1.27).
// Input: a JSON file made by tests/test_tlog_interop.py, tests/test_witness_interop.py or
// tests/test_serve_interop.py. Output: one line per check;
// exit status 1 when any check does not come out as the input expects.
package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

type inclusion struct {
	Note   string   `json:"note"`
	Seq    int64    `json:"seq"`
	Line   string   `json:"line"`
	Proof  []string `json:"proof"`
	Expect bool     `json:"expect"`
}

type consistency struct {
	OldNote string   `json:"old_note"`
	NewNote string   `json:"new_note"`
	Proof   []string `json:"proof"`
	Expect  bool     `json:"expect"`
}

type input struct {
	Verifier    string        `json:"verifier"`
	Notes       []string      `json:"notes"`
	BadNotes    []string      `json:"bad_notes"`
	Inclusion   []inclusion   `json:"inclusion"`
	Consistency []consistency `json:"consistency"`
	Chain       string        `json:"chain"`
	TileDir     string        `json:"tile_dir"`
	BadTileDir  string        `json:"bad_tile_dir"`
	Witness     *witnessInput `json:"witness"`
	Serve       []serveCase   `json:"serve"`
}

// dirTiles reads the C2SP tlog-tiles layout of a log directory (tile/<L>/<N>[.p/<W>], height 8; Go's
// paths carry the height, tile/8/<L>/...). A partial tile that is gone falls back to the full tile,
// as tlog-tiles allows clients to; tlog.TileHashReader authenticates every tile it is given.
type dirTiles struct{ dir string }

func (d dirTiles) Height() int { return 8 }

func (d dirTiles) ReadTiles(tiles []tlog.Tile) ([][]byte, error) {
	out := make([][]byte, len(tiles))
	for i, t := range tiles {
		path := strings.Replace(t.Path(), "tile/8/", "tile/", 1)
		data, err := os.ReadFile(filepath.Join(d.dir, filepath.FromSlash(path)))
		if err != nil && t.W < 256 {
			full := t
			full.W = 256
			data, err = os.ReadFile(filepath.Join(d.dir, filepath.FromSlash(strings.Replace(full.Path(), "tile/8/", "tile/", 1))))
			if err == nil {
				data = data[:t.W*tlog.HashSize]
			}
		}
		if err != nil {
			return nil, err
		}
		out[i] = data
	}
	return out, nil
}

func (d dirTiles) SaveTiles([]tlog.Tile, [][]byte) {}

type checkpoint struct {
	origin string
	size   int64
	root   tlog.Hash
}

func main() {
	data, err := os.ReadFile(os.Args[1])
	must(err)
	var in input
	must(json.Unmarshal(data, &in))
	verifier, err := note.NewVerifier(in.Verifier)
	must(err)
	verifiers := note.VerifierList(verifier)
	failures := 0
	check := func(what string, ok bool) {
		if ok {
			fmt.Println("ok  ", what)
		} else {
			fmt.Println("FAIL", what)
			failures++
		}
	}
	for i, text := range in.Notes {
		_, err := open(text, verifiers)
		check(fmt.Sprintf("note %d opens and parses: %v", i, err), err == nil)
	}
	for i, text := range in.BadNotes {
		_, err := open(text, verifiers)
		check(fmt.Sprintf("bad note %d is rejected: %v", i, err), err != nil)
	}
	for i, c := range in.Inclusion {
		err := checkInclusion(c, verifiers)
		check(fmt.Sprintf("inclusion %d (seq %d) holds=%v: %v", i, c.Seq, c.Expect, err), (err == nil) == c.Expect)
	}
	for i, c := range in.Consistency {
		err := checkConsistency(c, verifiers)
		check(fmt.Sprintf("consistency %d holds=%v: %v", i, c.Expect, err), (err == nil) == c.Expect)
	}
	checks := len(in.Notes) + len(in.BadNotes) + len(in.Inclusion) + len(in.Consistency)
	if in.TileDir != "" {
		data, err := os.ReadFile(in.Chain)
		must(err)
		lines := bytes.Split(data, []byte("\n"))
		latest, err := open(in.Notes[len(in.Notes)-1], verifiers)
		must(err)
		for i, text := range in.Notes {
			err := checkTiles(text, latest, lines, dirTiles{in.TileDir}, verifiers)
			check(fmt.Sprintf("tiles of checkpoint %d read and authenticated: %v", i, err), err == nil)
		}
		err = checkTiles(in.Notes[len(in.Notes)-1], latest, lines, dirTiles{in.BadTileDir}, verifiers)
		check(fmt.Sprintf("a damaged tile is rejected: %v", err), err != nil)
		checks += len(in.Notes) + 1
	}
	checks += checkWitness(in.Witness, check)
	checks += checkServe(in.Serve, verifiers, check)
	fmt.Printf("%d checks, %d failed\n", checks, failures)
	if failures > 0 {
		os.Exit(1)
	}
}

func open(text string, verifiers note.Verifiers) (checkpoint, error) {
	n, err := note.Open([]byte(text), verifiers)
	if err != nil {
		return checkpoint{}, err
	}
	return parseCheckpoint(n.Text)
}

// parseCheckpoint reads a C2SP tlog-checkpoint text: origin, decimal size, base64 root.
func parseCheckpoint(text string) (checkpoint, error) {
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if len(lines) != 3 || !strings.HasSuffix(text, "\n") {
		return checkpoint{}, fmt.Errorf("not a three-line checkpoint")
	}
	size, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil || size < 0 || strconv.FormatInt(size, 10) != lines[1] {
		return checkpoint{}, fmt.Errorf("bad size %q", lines[1])
	}
	raw, err := base64.StdEncoding.DecodeString(lines[2])
	if err != nil || len(raw) != tlog.HashSize {
		return checkpoint{}, fmt.Errorf("bad root %q", lines[2])
	}
	var root tlog.Hash
	copy(root[:], raw)
	return checkpoint{lines[0], size, root}, nil
}

func hashes(list []string) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(list))
	for i, s := range list {
		raw, err := base64.StdEncoding.DecodeString(s)
		if err != nil || len(raw) != tlog.HashSize {
			return nil, fmt.Errorf("bad hash %q", s)
		}
		copy(out[i][:], raw)
	}
	return out, nil
}

func checkInclusion(c inclusion, verifiers note.Verifiers) error {
	cp, err := open(c.Note, verifiers)
	if err != nil {
		return err
	}
	proof, err := hashes(c.Proof)
	if err != nil {
		return err
	}
	leaf := tlog.RecordHash(bytes.TrimSuffix([]byte(c.Line), []byte("\n")))
	return tlog.CheckRecord(tlog.RecordProof(proof), cp.size, cp.root, c.Seq, leaf)
}

func checkConsistency(c consistency, verifiers note.Verifiers) error {
	old, err := open(c.OldNote, verifiers)
	if err != nil {
		return err
	}
	cur, err := open(c.NewNote, verifiers)
	if err != nil {
		return err
	}
	if old.origin != cur.origin {
		return fmt.Errorf("origins differ")
	}
	proof, err := hashes(c.Proof)
	if err != nil {
		return err
	}
	return tlog.CheckTree(tlog.TreeProof(proof), cur.size, cur.root, old.size, old.root)
}

// checkTiles proves records and the tree's consistency with the latest checkpoint from the tiles
// alone, through tlog.TileHashReader (every tile authenticated against the signed root).
func checkTiles(text string, latest checkpoint, lines [][]byte, tiles dirTiles, verifiers note.Verifiers) error {
	cp, err := open(text, verifiers)
	if err != nil {
		return err
	}
	reader := tlog.TileHashReader(tlog.Tree{N: cp.size, Hash: cp.root}, tiles)
	for _, seq := range []int64{0, cp.size / 2, cp.size - 1} {
		proof, err := tlog.ProveRecord(cp.size, seq, reader)
		if err != nil {
			return err
		}
		if err := tlog.CheckRecord(proof, cp.size, cp.root, seq, tlog.RecordHash(lines[seq])); err != nil {
			return err
		}
	}
	newer := tlog.TileHashReader(tlog.Tree{N: latest.size, Hash: latest.root}, tiles)
	proof, err := tlog.ProveTree(latest.size, cp.size, newer)
	if err != nil {
		return err
	}
	return tlog.CheckTree(proof, latest.size, latest.root, cp.size, cp.root)
}

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "interop:", err)
		os.Exit(2)
	}
}
