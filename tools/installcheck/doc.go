// Command installcheck proves that the slidelog modules install outside this
// repository, the way a user gets them: by version, through a module proxy,
// with no replace directives and no go.work.
//
// It builds a file-system module proxy from the working tree at a test
// version (default v0.0.0-installcheck): for every module listed in go.work,
// a copy of the module's files (those git tracks or would track) whose
// go.mod requires its sibling modules at the test version and carries no
// replace directives, written in the proxy layout (<module>/@v/list, .info,
// .mod, .zip; the zip made by golang.org/x/mod/zip). Then, for every adapter
// module under adapters/ (discovered, not listed), it creates a fresh module
// in a temporary directory, runs
//
//	go get github.com/slidelog/slidelog/adapters/<fw>@<version>
//
// there, writes the quick start of the adapter's docs page as main.go, runs
// go mod tidy and go build, and checks that the adapter and core resolved at
// the test version.
//
// The go commands run with GOWORK=off, a fresh module cache, GOFLAGS
// -mod=mod, GONOSUMDB naming our module path (our unpublished modules are
// not in the public checksum database; third-party modules still are
// checked), and GOPROXY set to the file proxy, then the local module cache's
// download directory as a second file proxy (so third-party modules already
// downloaded are not fetched again), then the GOPROXY of the environment.
//
// Usage (make install-check runs it from the repository root):
//
//	go run ./tools/installcheck [-root .] [-version v0.0.0-installcheck] [-timeout 20m] [-keep]
//
// Any failure names the module and the step, and the exit status is 1. The
// whole run is bounded by -timeout; the temporary directory is removed at
// the end unless -keep is given.
package main
