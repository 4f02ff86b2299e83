package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/wqhost/wqhost/host/config"
	"github.com/wqhost/wqhost/listener/queue"
)

const sendDoc = `
Sends messages to a tenant's queue on the backend the config gives it (the local store under
--data-dir by default). The body is BODY, or the contents of --file (- for stdin); with --lines
each non-empty line of the file is one message. --count N sends the body N times, replacing
{n} in it by the message number 1..N, with a progress bar. A running 'wqhost run' on the same
local store picks the messages up at once.`

// sendChunk is how many messages one SendBatch commits: large enough to amortise the fsync,
// small enough for a progress bar that moves.
const sendChunk = 256

// batchSender is implemented by backends that commit many messages at once (local).
type batchSender interface {
	SendBatch(ctx context.Context, bodies [][]byte, opts queue.SendOptions) ([]string, error)
}

func (c *cli) send(ctx context.Context, args []string) error {
	fl := c.flags("send", "[--config FILE] [--data-dir DIR] [--tenant T] --queue Q [--count N] [--delay D] [--order N] [--file F [--lines] | BODY]", sendDoc)
	cfgFile := configFlags(fl)
	tenant := fl.String("tenant", "default", "tenant that owns the queue")
	qname := fl.String("queue", "", "queue to send to (required)")
	count := fl.Int("count", 1, "send the body this many times ({n} in the body becomes 1..N)")
	file := fl.String("file", "", "read the body from this file (- for stdin)")
	lines := fl.Bool("lines", false, "with --file: one message per non-empty line")
	delay := fl.Duration("delay", 0, "keep the messages invisible for this long (at most 168h)")
	order := fl.String("order", "", "ordered execution group (an integer) for a binding with ordered: true")
	if err := c.parse(fl, args); err != nil {
		return err
	}
	switch {
	case *qname == "":
		return usagef("--queue is required")
	case strings.HasSuffix(*qname, config.PoisonSuffix):
		return usagef("--queue %s: %v (requeue dead letters with 'wqhost poison requeue')", *qname, config.ErrReservedQueue)
	case *count < 1:
		return usagef("--count %d: must be at least 1", *count)
	case *delay < 0 || *delay > config.MaxVisibility:
		return usagef("--delay %s: must be within 0..%s", *delay, config.MaxVisibility)
	case *file != "" && fl.NArg() > 0:
		return usagef("give either --file or BODY, not both")
	case *file == "" && fl.NArg() != 1:
		return usagef("want one BODY argument or --file (got %d arguments)", fl.NArg())
	case *lines && *file == "":
		return usagef("--lines needs --file")
	case *lines && fl.Changed("count"):
		return usagef("--lines and --count do not mix")
	}
	cfg, err := c.loadConfig(*cfgFile, fl)
	if err != nil {
		return err
	}
	limit := int64(config.DefaultMaxMessageBytes)
	if t, ok := cfg.Tenants[*tenant]; ok {
		limit = int64(t.Limits.MaxMessageBytes)
	}
	if *order != "" {
		if _, err := strconv.ParseInt(*order, 10, 64); err != nil {
			return usagef("--order %q: must be an integer group number", *order)
		}
	}
	if _, err := cfg.QueueBackend(*tenant, *qname); err != nil {
		return &usageError{err: err}
	}
	src, err := c.bodies(*file, *lines, fl.Args(), *count, limit, *tenant)
	if err != nil {
		return err
	}
	if api := c.runningHost(ctx, cfg, *tenant); api != nil {
		return c.sendThrough(ctx, api, *tenant, *qname, src, *delay, *order)
	}
	q, closer, err := openQueue(ctx, cfg, *tenant, *qname)
	if err != nil {
		return err
	}
	defer closer.Close()

	opts := queue.SendOptions{Delay: *delay}
	if *order != "" {
		opts.Attributes = map[string]string{queue.AttrOrderKey: *order}
	}
	if src.n == 1 {
		id, err := q.Send(ctx, src.body(0), opts)
		if err != nil {
			return err
		}
		fmt.Fprintf(c.stdout, "sent message %s to %s\n", id, *qname)
		return closer.Close()
	}
	total := src.n
	bar := c.progress(total, "sending to "+*qname)
	start := time.Now()
	bs, batched := q.(batchSender)
	halt, stopHalt := c.sendHalt()
	defer stopHalt()
	// One chunk of bodies at a time: --count 2000000000 streams in bounded memory.
	chunk := make([][]byte, 0, sendChunk)
	for i := 0; i < total; {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("after %d of %d messages: %w", i, total, err)
		}
		if err := halted(halt, i, total, *qname); err != nil {
			return err
		}
		n := 1
		if batched {
			n = min(sendChunk, total-i)
			chunk = chunk[:0]
			for j := range n {
				chunk = append(chunk, src.body(i+j))
			}
			if _, err := bs.SendBatch(ctx, chunk, opts); err != nil {
				return fmt.Errorf("after %d of %d messages: %w", i, total, err)
			}
		} else if _, err := q.Send(ctx, src.body(i), opts); err != nil {
			return fmt.Errorf("after %d of %d messages: %w", i, total, err)
		}
		i += n
		bar.Add(n)
	}
	bar.Finish()
	el := time.Since(start)
	fmt.Fprintf(c.stdout, "sent %d messages to %s in %s (%.0f msg/s)\n", total, *qname, el.Round(time.Millisecond), float64(total)/el.Seconds())
	return closer.Close()
}

// sendHalt returns a channel closed by the first SIGINT or SIGTERM during a send of many
// messages (c.halt in tests), so the send stops between chunks and says how many it sent
// instead of dying mid-way without a word; a second signal ends the process at once. The
// func stops listening.
func (c *cli) sendHalt() (<-chan struct{}, func()) {
	if c.halt != nil {
		return c.halt, func() {}
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	halt, done := make(chan struct{}), make(chan struct{})
	go func() {
		select {
		case <-sig:
			signal.Stop(sig) // the default again: a second signal is not waited on
			close(halt)
		case <-done:
		}
	}()
	return halt, func() { signal.Stop(sig); close(done) }
}

// halted is the error that ends a send interrupted after sent of total messages, or nil.
// A chunk is sent whole or not at all (one transaction on the local store; through a host,
// its request answered), so sent is exact.
func halted(halt <-chan struct{}, sent, total int, qname string) error {
	select {
	case <-halt:
		return fmt.Errorf("interrupted after %d of %d messages: those %d are in %s, the rest were not sent", sent, total, sent, qname)
	default:
		return nil
	}
}

// bodySource yields the n bodies of a send one at a time, so --count never holds them all.
type bodySource struct {
	n     int
	lines [][]byte // with --lines
	templ string   // with --count: {n} replaced by the message number
	tmpl  bool
	one   []byte
}

func (s *bodySource) body(i int) []byte {
	switch {
	case s.lines != nil:
		return s.lines[i]
	case s.tmpl:
		return []byte(strings.ReplaceAll(s.templ, "{n}", strconv.Itoa(i+1)))
	}
	return s.one
}

// bodies reads what to send, refusing any body above limit (the tenant's
// limits.max_message_bytes: the host would reject it unread) before anything is sent.
func (c *cli) bodies(file string, lines bool, args []string, count int, limit int64, tenant string) (*bodySource, error) {
	tooBig := func(what, size string) error {
		return usagef("%s is %s, above tenants.%s.limits.max_message_bytes %s", what, size, tenant, config.ByteSize(limit))
	}
	var body []byte
	if file == "" {
		body = []byte(args[0])
	} else {
		var r io.Reader
		if file == "-" {
			r = c.stdin
		} else {
			f, err := os.Open(file)
			if err != nil {
				return nil, usagef("--file: %v", err)
			}
			defer f.Close()
			// A regular file's size is known: refuse it with its real size, unread.
			if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() && !lines && fi.Size() > limit {
				return nil, tooBig("--file "+file, sizeText(fi.Size()))
			}
			r = f
		}
		if lines {
			var out [][]byte
			sc := bufio.NewScanner(r)
			sc.Buffer(make([]byte, 64<<10), int(min(limit+2, 64<<20)))
			for sc.Scan() {
				if l := bytes.TrimSpace(sc.Bytes()); len(l) > 0 {
					if int64(len(l)) > limit {
						return nil, tooBig(fmt.Sprintf("line %d of %s", len(out)+1, file), sizeText(int64(len(l))))
					}
					out = append(out, bytes.Clone(l))
				}
			}
			if err := sc.Err(); err != nil {
				if errors.Is(err, bufio.ErrTooLong) {
					return nil, tooBig("a line of "+file, fmt.Sprintf("more than %d bytes", limit))
				}
				return nil, fmt.Errorf("read %s: %w", file, err)
			}
			if len(out) == 0 {
				return nil, usagef("--file %s has no non-empty lines", file)
			}
			return &bodySource{n: len(out), lines: out}, nil
		}
		b, err := io.ReadAll(io.LimitReader(r, limit+1))
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", file, err)
		}
		if int64(len(b)) > limit {
			// Only limit+1 bytes were read (stdin, a pipe): the real size is not known.
			return nil, tooBig("--file "+file, fmt.Sprintf("more than %d bytes", limit))
		}
		body = b
	}
	templ := string(body)
	src := &bodySource{n: count, one: body, templ: templ, tmpl: count > 1 && strings.Contains(templ, "{n}")}
	longest := int64(len(body))
	if src.tmpl {
		longest = int64(len(src.body(count - 1)))
	}
	if longest > limit {
		return nil, tooBig("the body", sizeText(longest))
	}
	return src, nil
}

// sizeText is n bytes as a user reads it: "10485760 bytes (10MiB)".
func sizeText(n int64) string {
	if s := config.ByteSize(n).String(); s != strconv.FormatInt(n, 10) {
		return fmt.Sprintf("%d bytes (%s)", n, s)
	}
	return fmt.Sprintf("%d bytes", n)
}

// progress returns a progress bar on stderr; off a terminal it prints nothing until the end,
// so logs and CI output stay clean.
func (c *cli) progress(total int, what string) *progressbar.ProgressBar {
	if !c.isTerminal {
		return progressbar.NewOptions(total, progressbar.OptionSetWriter(io.Discard))
	}
	return progressbar.NewOptions(total,
		progressbar.OptionSetWriter(c.stderr),
		progressbar.OptionSetDescription(what),
		progressbar.OptionShowCount(),
		progressbar.OptionShowIts(),
		progressbar.OptionSetItsString("msg"),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionClearOnFinish(),
	)
}
