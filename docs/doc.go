// Package docs holds no code: it is the user documentation (this
// directory's pages by task) and the tests that keep README.md,
// ARCHITECTURE.md and these pages true.
//
// The tests read only files, run unprivileged and fast, and are part of
// `make unit`:
//
//   - the README is the front door: at most readmeMaxLines lines, and it
//     links every page here;
//   - every relative link and #anchor resolves, with GitHub's anchor rules;
//   - every shell block is run by a named test that exists, or says why not;
//   - every message troubleshooting.md quotes is still in the Go source;
//   - ARCHITECTURE.md names every package under pkg/, and no package that
//     is gone.
//
// configuration.md is generated from config's key table; its test lives in
// package config (TestConfigurationDoc), which can see the table.
package docs
