package console_test

import (
	"bufio"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"
)

// A live stream open when the host shuts down is ended by the console (the response closes
// in order, not cut by the server's shutdown deadline), so it holds up nothing.
func TestStreamEndsOnShutdown(t *testing.T) {
	e := startHost(t)
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: time.Minute}
	resp, err := c.PostForm(e.base+"/console/login", url.Values{"token": {hostToken}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	resp, err = c.Get(e.base + "/console/events")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("stream: %v %v", resp, err)
	}
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	line, err := r.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "event: snapshot") {
		t.Fatalf("first line %q: %v", line, err)
	}
	e.stop()
	if _, err := io.Copy(io.Discard, r); err != nil {
		t.Fatalf("the stream was cut at shutdown (%v), not ended by the console", err)
	}
}
