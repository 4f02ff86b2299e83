package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/wqhost/wqhost/host/config"
	"github.com/wqhost/wqhost/listener"
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
	SendBatch(ctx context.Context, bodies [][]byte, opts listener.SendOptions) ([]string, error)
}

func (c *cli) send(ctx context.Context, args []string) error {
	fl := c.flags("send", "[--config FILE] [--data-dir DIR] [--tenant T] --queue Q [--count N] [--file F [--lines] | BODY]", sendDoc)
	cfgFile := configFlags(fl)
	tenant := fl.String("tenant", "default", "tenant that owns the queue")
	queue := fl.String("queue", "", "queue to send to (required)")
	count := fl.Int("count", 1, "send the body this many times ({n} in the body becomes 1..N)")
	file := fl.String("file", "", "read the body from this file (- for stdin)")
	lines := fl.Bool("lines", false, "with --file: one message per non-empty line")
	delay := fl.Duration("delay", 0, "keep the messages invisible for this long")
	order := fl.String("order", "", "ordered execution group (an integer) for a binding with ordered: true")
	if err := c.parse(fl, args); err != nil {
		return err
	}
	switch {
	case *queue == "":
		return usagef("--queue is required")
	case strings.HasSuffix(*queue, config.PoisonSuffix):
		return usagef("--queue %s: %v (requeue dead letters with 'wqhost poison requeue')", *queue, config.ErrReservedQueue)
	case *count < 1:
		return usagef("--count %d: must be at least 1", *count)
	case *file != "" && fl.NArg() > 0:
		return usagef("give either --file or BODY, not both")
	case *file == "" && fl.NArg() != 1:
		return usagef("want one BODY argument or --file (got %d arguments)", fl.NArg())
	case *lines && *file == "":
		return usagef("--lines needs --file")
	case *lines && fl.Changed("count"):
		return usagef("--lines and --count do not mix")
	}
	bodies, err := c.bodies(*file, *lines, fl.Args(), *count)
	if err != nil {
		return err
	}
	cfg, err := c.loadConfig(*cfgFile, fl)
	if err != nil {
		return err
	}
	q, closer, err := openQueue(ctx, cfg, *tenant, *queue)
	if err != nil {
		return err
	}
	defer closer.Close()

	opts := listener.SendOptions{Delay: *delay}
	if *order != "" {
		if _, err := strconv.ParseInt(*order, 10, 64); err != nil {
			return usagef("--order %q: must be an integer group number", *order)
		}
		opts.Attributes = map[string]string{listener.AttrOrderKey: *order}
	}
	if len(bodies) == 1 {
		id, err := q.Send(ctx, bodies[0], opts)
		if err != nil {
			return err
		}
		fmt.Fprintf(c.stdout, "sent message %s to %s\n", id, *queue)
		return closer.Close()
	}
	bar := c.progress(len(bodies), "sending to "+*queue)
	start := time.Now()
	bs, batched := q.(batchSender)
	for i := 0; i < len(bodies); {
		n := 1
		if batched {
			n = min(sendChunk, len(bodies)-i)
			if _, err := bs.SendBatch(ctx, bodies[i:i+n], opts); err != nil {
				return fmt.Errorf("after %d of %d messages: %w", i, len(bodies), err)
			}
		} else if _, err := q.Send(ctx, bodies[i], opts); err != nil {
			return fmt.Errorf("after %d of %d messages: %w", i, len(bodies), err)
		}
		i += n
		bar.Add(n)
	}
	bar.Finish()
	el := time.Since(start)
	fmt.Fprintf(c.stdout, "sent %d messages to %s in %s (%.0f msg/s)\n", len(bodies), *queue, el.Round(time.Millisecond), float64(len(bodies))/el.Seconds())
	return closer.Close()
}

func (c *cli) bodies(file string, lines bool, args []string, count int) ([][]byte, error) {
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
			r = f
		}
		if lines {
			var out [][]byte
			sc := bufio.NewScanner(r)
			sc.Buffer(make([]byte, 64<<10), 64<<20)
			for sc.Scan() {
				if l := bytes.TrimSpace(sc.Bytes()); len(l) > 0 {
					out = append(out, bytes.Clone(l))
				}
			}
			if err := sc.Err(); err != nil {
				return nil, fmt.Errorf("read %s: %w", file, err)
			}
			if len(out) == 0 {
				return nil, usagef("--file %s has no non-empty lines", file)
			}
			return out, nil
		}
		b, err := io.ReadAll(r)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", file, err)
		}
		body = b
	}
	if count == 1 {
		return [][]byte{body}, nil
	}
	out := make([][]byte, count)
	templ := string(body)
	numbered := strings.Contains(templ, "{n}")
	for i := range out {
		if numbered {
			out[i] = []byte(strings.ReplaceAll(templ, "{n}", strconv.Itoa(i+1)))
		} else {
			out[i] = body
		}
	}
	return out, nil
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
