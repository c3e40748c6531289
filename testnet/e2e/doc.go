// Package e2e holds end-to-end tests of E31: real e31d processes on
// 127.0.0.1, a real runc sandbox, real Badger stores, driven through the
// local API exactly as the e31 command drives them.
package e2e
