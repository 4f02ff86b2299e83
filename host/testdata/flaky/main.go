// Command flaky is the host tests' wqhost/v1 fixture. By body:
//
//	retry-once:<x>  asks for a retry (10 ms) on its first delivery, then emits <x>
//	sleep:<ms>      sleeps ms milliseconds, then emits the body
//	fail            always asks for a retry
//	anything else   is emitted unchanged
//
// Rebuild: go generate ./host (see host/generate.go).
package main

import (
	"errors"
	"strconv"
	"strings"
	"time"

	wqhost "github.com/wqhost/wqhost/sdk/go"
)

func init() { wqhost.Handle(handle) }

func handle(m *wqhost.Message) wqhost.Result {
	body := string(m.Body())
	cmd, arg, _ := strings.Cut(body, ":")
	switch cmd {
	case "retry-once":
		if m.DequeueCount() < 2 {
			return wqhost.Retry(10*time.Millisecond, errors.New("first delivery: try again"))
		}
		body = arg
	case "sleep":
		ms, _ := strconv.Atoi(arg)
		time.Sleep(time.Duration(ms) * time.Millisecond)
	case "fail":
		return wqhost.Retry(0, errors.New("always failing"))
	}
	if err := wqhost.Emit("", []byte(body)); err != nil {
		return wqhost.Retry(0, err)
	}
	return wqhost.OK()
}

func main() {}
