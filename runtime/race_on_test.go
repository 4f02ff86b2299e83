//go:build race

package runtime

// raceDetector: the tests run with the race detector (a slow test may run a share of its
// cases then).
const raceDetector = true
