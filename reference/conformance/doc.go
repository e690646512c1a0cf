// Package conformance holds one test, TestConformance, which runs the whole conformance suite
// against the reference engine in-process, one subtest per profile of the requirement catalogue.
//
// It lives in a package of its own so that the suite can be run, timed and bounded apart from the
// engine's unit tests, and a part of it chosen by profile:
//
//	go test -run 'TestConformance/^(core|stream)$' ./reference/conformance/
//
// A profile's subtest has one subtest per scenario. Under -short the suite is skipped.
package conformance
