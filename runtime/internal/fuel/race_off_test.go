//go:build !race

package fuel

// raceDetector: see race_on_test.go.
const raceDetector = false
