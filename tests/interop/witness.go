// Witness checks: cosigned notes opened with golang.org/x/mod/sumdb/note and filippo.io/torchwood's
// cosignature/v1 verifiers, policies parsed with torchwood's ParsePolicy and checkpoints checked with its
// VerifyCheckpoint, receipts (c2sp.org/tlog-proof@v1) checked with its VerifyProof. Each case carries
// what otel-route-shadow concluded; a check passes when torchwood concludes the same.
package main

import (
	"bytes"
	"fmt"
	"slices"

	"filippo.io/torchwood"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

type cosignedNote struct {
	Note string `json:"note"`
	// Witnesses whose cosignature we verified (their key names); nil when we rejected the note.
	Verified []string `json:"verified"`
	Rejected bool     `json:"rejected"`
}

type policyCase struct {
	Text string `json:"text"`
	// Whether torchwood's ParsePolicy is expected to accept the text (we refuse more than it does).
	TorchwoodAccepts bool `json:"torchwood_accepts"`
	// For a policy both accept: notes and whether our quorum was met on each.
	Checks []policyCheck `json:"checks"`
}

type policyCheck struct {
	Note string `json:"note"`
	Met  bool   `json:"met"`
}

type receiptCase struct {
	Policy  string `json:"policy"`
	Receipt string `json:"receipt"`
	Line    string `json:"line"`
	Valid   bool   `json:"valid"`
}

type witnessInput struct {
	LogVerifier      string         `json:"log_verifier"`
	WitnessVerifiers []string       `json:"witness_verifiers"`
	Cosigned         []cosignedNote `json:"cosigned"`
	Policies         []policyCase   `json:"policies"`
	Receipts         []receiptCase  `json:"receipts"`
}

// checkWitness runs every witness case; check records each outcome.
func checkWitness(in *witnessInput, check func(string, bool)) int {
	if in == nil {
		return 0
	}
	logVerifier, err := note.NewVerifier(in.LogVerifier)
	must(err)
	verifiers := []note.Verifier{logVerifier}
	for _, vkey := range in.WitnessVerifiers {
		v, err := torchwood.NewCosignatureVerifier(vkey)
		must(err)
		verifiers = append(verifiers, v)
	}
	known := note.VerifierList(verifiers...)
	for i, c := range in.Cosigned {
		got, err := cosigners(c.Note, known, logVerifier.Name())
		if c.Rejected {
			check(fmt.Sprintf("cosigned note %d is rejected as we rejected it: %v", i, err), err != nil)
			continue
		}
		same := err == nil && slices.Equal(sorted(got), sorted(c.Verified))
		check(fmt.Sprintf("cosigned note %d: torchwood sees %v, we saw %v (%v)", i, got, c.Verified, err), same)
	}
	checks := len(in.Cosigned)
	for i, p := range in.Policies {
		policy, err := torchwood.ParsePolicy([]byte(p.Text))
		check(fmt.Sprintf("policy %d: ParsePolicy accepts=%v as expected: %v", i, p.TorchwoodAccepts, err),
			(err == nil) == p.TorchwoodAccepts)
		checks++
		for j, c := range p.Checks {
			checks++
			if policy == nil {
				check(fmt.Sprintf("policy %d check %d: no policy", i, j), false)
				continue
			}
			_, _, err := torchwood.VerifyCheckpoint([]byte(c.Note), policy)
			check(fmt.Sprintf("policy %d check %d: VerifyCheckpoint ok=%v as our quorum: %v", i, j, c.Met, err),
				(err == nil) == c.Met)
		}
	}
	for i, r := range in.Receipts {
		policy, err := torchwood.ParsePolicy([]byte(r.Policy))
		must(err)
		leaf := tlog.RecordHash(bytes.TrimSuffix([]byte(r.Line), []byte("\n")))
		err = torchwood.VerifyProof(policy, leaf, []byte(r.Receipt))
		check(fmt.Sprintf("receipt %d: VerifyProof ok=%v as ours: %v", i, r.Valid, err), (err == nil) == r.Valid)
	}
	return checks + len(in.Receipts)
}

// cosigners opens the note with the log's and the witnesses' keys and lists the witnesses that signed.
func cosigners(text string, known note.Verifiers, logName string) ([]string, error) {
	n, err := note.Open([]byte(text), known)
	if err != nil {
		return nil, err
	}
	names := []string{}
	for _, sig := range n.Sigs {
		if sig.Name != logName {
			names = append(names, sig.Name)
		}
	}
	return names, nil
}

func sorted(list []string) []string {
	out := slices.Clone(list)
	if out == nil {
		out = []string{}
	}
	slices.Sort(out)
	return out
}
