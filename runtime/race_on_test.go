//go:build race

package runtime

// raceDetector: the tests run with the race detector, which slows the interpreter about
// tenfold; TestSpecSuite runs a quarter of the suite then (it has one goroutine, nothing for
// the detector to find).
const raceDetector = true
