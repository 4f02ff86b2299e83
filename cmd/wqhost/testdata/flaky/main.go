// Command flaky is the end-to-end tests' guest (wqhost/v1, Go SDK). The body picks its
// behaviour:
//
//	ok:<text>       emits <text> to the output queue and succeeds
//	flaky:<n>:<text> asks for a retry (10 ms later) until the dequeue count reaches n, then
//	                emits "<text> after <count>" and succeeds
//	fail:<text>     always fails with a retry status: dead-lettered after max_dequeue_count
//	reject:<text>   rejected at once with <text> as the reason
//	spin:<n>:<text> burns n million loop iterations of CPU (the guest's clock is not wall
//	                time), then emits <text>
package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	wqhost "github.com/wqhost/wqhost/sdk/go"
)

func init() { wqhost.Handle(handle) }

func handle(m *wqhost.Message) wqhost.Result {
	cmd, rest, _ := strings.Cut(string(m.Body()), ":")
	switch cmd {
	case "ok":
		return emit(rest)
	case "flaky":
		ns, text, _ := strings.Cut(rest, ":")
		n, err := strconv.Atoi(ns)
		if err != nil {
			return wqhost.Reject(fmt.Errorf("flaky: bad count %q", ns))
		}
		if c := m.DequeueCount(); c < n {
			return wqhost.Retry(10*time.Millisecond, fmt.Errorf("flaky: attempt %d of %d", c, n))
		}
		return emit(fmt.Sprintf("%s after %d", text, m.DequeueCount()))
	case "fail":
		return wqhost.Retry(0, errors.New("fail: "+rest))
	case "reject":
		return wqhost.Reject(errors.New(rest))
	case "spin":
		ns, text, _ := strings.Cut(rest, ":")
		n, _ := strconv.Atoi(ns)
		x := uint32(1)
		for i := 0; i < n*1_000_000; i++ {
			x = x*1664525 + 1013904223
		}
		sink = x
		return emit(text)
	}
	return wqhost.Reject(fmt.Errorf("unknown command %q", cmd))
}

var sink uint32

func emit(s string) wqhost.Result {
	if err := wqhost.Emit("", []byte(s)); err != nil {
		return wqhost.Retry(0, err)
	}
	return wqhost.OK()
}

func main() {}
