// Package copycheck holds the tests that prove the examples and the
// documentation's Go code compile as a user would use them: each program
// copied alone into a new module of its own, outside the workspace
// (GOWORK=off), with the slidelog modules replaced by this checkout.
//
//	cd examples && go test ./copycheck
//
// A test beside them checks that the doc comments, README.md and the
// pages of docs/ name only identifiers that exist (TestDocsNameWhatExists).
//
// The modules' third-party requirements are the examples module's and the
// adapters' (so the builds need no module lookups beyond the module cache).
package copycheck
