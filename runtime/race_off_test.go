//go:build !race

package runtime

// raceDetector: see race_on_test.go.
const raceDetector = false
