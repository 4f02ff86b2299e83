//go:build race

package fuel

// raceDetector: the tests run with the race detector (TestSpecSuite runs a share of the
// suite then).
const raceDetector = true
