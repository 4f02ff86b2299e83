package runtime

import (
	"os"
	"testing"
)

// TestMain lets this test binary serve as its own compile child (EngineConfig.CompileInChild).
func TestMain(m *testing.M) {
	RunCompileChild()
	os.Exit(m.Run())
}
