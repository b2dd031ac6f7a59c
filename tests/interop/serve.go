// Serve checks: a live `otel-route-shadow serve` read over HTTP by code this project did not write.
// filippo.io/torchwood's Client (TileFetcher, AllEntries) fetches the checkpoint, the tiles and the entry
// bundles and authenticates every entry; golang.org/x/mod/sumdb/tlog's TileHashReader over an HTTP tile
// reader proves every entry included and each published tree consistent with the latest and with the one
// before it. Each case says, per checkpoint, whether this must succeed (a corrupted tile or a deleted
// partial tile must make it fail). A pruned log (min_index m > 0) is read from m on: every entry at or
// above m, a full entry bundle ending at or below m answered 410 Gone. torchwood-v0.6.1/ runs the entries check with torchwood v0.6.1's Client on
// the same cases.
package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"time"

	"filippo.io/torchwood"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

type serveCase struct {
	Name   string   `json:"name"`
	URL    string   `json:"url"` // the log's prefix, ending in /
	Chain  string   `json:"chain"`
	Notes  []string `json:"notes"`  // every published checkpoint, oldest first
	Expect []bool   `json:"expect"` // per note: must the checks succeed
	// The log's minimum index (tlog-tiles "Pruning"): entries are read and proven from it on; every
	// note's size is at least it.
	MinIndex int64 `json:"min_index"`
}

// httpTiles is a tlog.TileReader over HTTP in the C2SP tlog-tiles layout. It keeps what it fetched in
// memory; tlog.TileHashReader authenticates every tile each time it is handed one.
type httpTiles struct {
	base  string
	hc    *http.Client
	mu    sync.Mutex
	cache map[string][]byte
}

func (h *httpTiles) Height() int { return torchwood.TileHeight }

func (h *httpTiles) ReadTiles(tiles []tlog.Tile) ([][]byte, error) {
	out := make([][]byte, len(tiles))
	for i, t := range tiles {
		path := torchwood.TilePath(t)
		h.mu.Lock()
		data, ok := h.cache[path]
		h.mu.Unlock()
		if !ok {
			resp, err := h.hc.Get(h.base + path)
			if err != nil {
				return nil, err
			}
			data, err = io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				return nil, err
			}
			if resp.StatusCode != http.StatusOK {
				return nil, fmt.Errorf("%s: status %d: %s", path, resp.StatusCode, bytes.TrimSpace(data))
			}
			h.mu.Lock()
			h.cache[path] = data
			h.mu.Unlock()
		}
		out[i] = data
	}
	return out, nil
}

func (h *httpTiles) SaveTiles([]tlog.Tile, [][]byte) {}

func checkServe(cases []serveCase, verifiers note.Verifiers, check func(string, bool)) int {
	checks := 0
	for _, c := range cases {
		data, err := os.ReadFile(c.Chain)
		must(err)
		lines := bytes.Split(data, []byte("\n"))
		latest, err := open(c.Notes[len(c.Notes)-1], verifiers)
		must(err)
		err = checkCheckpointEndpoint(c, verifiers)
		check(fmt.Sprintf("%s: GET checkpoint is the latest note, signed: %v", c.Name, err), err == nil)
		checks++
		if c.MinIndex >= tileWidth {
			err = checkPrunedBundle(c)
			check(fmt.Sprintf("%s: the entry bundle wholly below the minimum index %d is 410 Gone: %v", c.Name, c.MinIndex, err), err == nil)
			checks++
		}
		for i, text := range c.Notes {
			cp, err := open(text, verifiers)
			must(err)
			err = torchwoodEntries(c.URL, cp, lines, c.MinIndex)
			check(fmt.Sprintf("%s: torchwood Client authenticates all %d entries of checkpoint %d from %d: ok=%v (expected %v): %v",
				c.Name, cp.size-c.MinIndex, i, c.MinIndex, err == nil, c.Expect[i], err), (err == nil) == c.Expect[i])
			var previous *checkpoint
			if i > 0 {
				p, err := open(c.Notes[i-1], verifiers)
				must(err)
				previous = &p
			}
			err = xmodProofs(c.URL, cp, latest, previous, lines, c.MinIndex)
			check(fmt.Sprintf("%s: x/mod tlog proves every entry and consistency for checkpoint %d: ok=%v (expected %v): %v",
				c.Name, i, err == nil, c.Expect[i], err), (err == nil) == c.Expect[i])
			checks += 2
		}
	}
	return checks
}

const tileWidth = 1 << torchwood.TileHeight

// checkPrunedBundle: the first full entry bundle (entries [0, 256)) of a log pruned at or above 256 is
// answered 410 Gone, as tlog-tiles lets a pruned log answer.
func checkPrunedBundle(c serveCase) error {
	hc := &http.Client{Timeout: 10 * time.Second}
	resp, err := hc.Get(c.URL + "tile/entries/000")
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusGone {
		return fmt.Errorf("status %d, not 410", resp.StatusCode)
	}
	return nil
}

func checkCheckpointEndpoint(c serveCase, verifiers note.Verifiers) error {
	fetcher, err := torchwood.NewTileFetcher(c.URL)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	data, err := fetcher.ReadEndpoint(ctx, "checkpoint")
	if err != nil {
		return err
	}
	if _, err := note.Open(data, verifiers); err != nil {
		return err
	}
	if string(data) != c.Notes[len(c.Notes)-1] {
		return fmt.Errorf("served %q, not the latest note", data)
	}
	return nil
}

// torchwoodEntries reads every entry of the checkpoint's tree from “start“ on with torchwood's Client (each
// entry checked against the level-0 tiles it authenticated) and compares them with the chain's lines.
func torchwoodEntries(base string, cp checkpoint, lines [][]byte, start int64) error {
	if start >= cp.size {
		// Nothing to read; torchwood's Client would still fetch the bundle ending at start, which a log
		// pruned at start answers 410.
		return nil
	}
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
	count := start
	for i, entry := range client.AllEntries(ctx, tlog.Tree{N: cp.size, Hash: cp.root}, start) {
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
	if count != cp.size {
		return fmt.Errorf("%d entries, not %d", count-start, cp.size-start)
	}
	return nil
}

// xmodProofs proves, from tiles fetched over HTTP, every entry included in the checkpoint's tree, and the
// tree consistent with the latest one and with the checkpoint before it; from “start“ (a pruned log's
// minimum index) on.
func xmodProofs(base string, cp, latest checkpoint, previous *checkpoint, lines [][]byte, start int64) error {
	tiles := &httpTiles{base: base, hc: &http.Client{Timeout: 10 * time.Second}, cache: map[string][]byte{}}
	reader := tlog.TileHashReader(tlog.Tree{N: cp.size, Hash: cp.root}, tiles)
	for i := start; i < cp.size; i++ {
		proof, err := tlog.ProveRecord(cp.size, i, reader)
		if err != nil {
			return err
		}
		if err := tlog.CheckRecord(proof, cp.size, cp.root, i, tlog.RecordHash(lines[i])); err != nil {
			return fmt.Errorf("entry %d: %w", i, err)
		}
	}
	newest := tlog.TileHashReader(tlog.Tree{N: latest.size, Hash: latest.root}, tiles)
	proof, err := tlog.ProveTree(latest.size, cp.size, newest)
	if err != nil {
		return err
	}
	if err := tlog.CheckTree(proof, latest.size, latest.root, cp.size, cp.root); err != nil {
		return err
	}
	if previous == nil {
		return nil
	}
	proof, err = tlog.ProveTree(cp.size, previous.size, reader)
	if err != nil {
		return err
	}
	return tlog.CheckTree(proof, cp.size, cp.root, previous.size, previous.root)
}
