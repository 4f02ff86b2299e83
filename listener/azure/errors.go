package azure

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"syscall"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/queueerror"

	"github.com/wqhost/wqhost/listener/queue"
)

// ErrUnavailable marks transient storage faults (server busy, internal errors, timeouts,
// refused connections) that outlasted the retry policy. Callers back off and try again. It
// matches queue.ErrUnavailable too.
var ErrUnavailable = fmt.Errorf("storage unavailable: %w", queue.ErrUnavailable)

// ErrClosed is returned by operations on a closed Backend.
var ErrClosed = errors.New("azure backend closed")

// Error is a failed storage operation. Its text names the operation, queue and message and
// never contains secrets. It unwraps to the matching sentinel (queue.ErrLeaseLost,
// queue.ErrNotFound, ErrUnavailable, context errors) but deliberately not to the SDK's
// error, whose text or URL may carry a SAS signature.
type Error struct {
	// Op is the operation: "receive from", "delete", "update visibility of", "send to",
	// "get properties of", "create".
	Op string
	// Queue is the queue's name.
	Queue string
	// MessageID is the message concerned, if any.
	MessageID string
	// StatusCode is the HTTP status storage answered with, or 0 without an answer.
	StatusCode int
	// Code is storage's error code (e.g. "PopReceiptMismatch"), if any.
	Code string

	msg   string
	kinds []error
}

func (e *Error) Error() string { return e.msg }

// Unwrap returns the sentinels the error matches.
func (e *Error) Unwrap() []error { return e.kinds }

// IsTransient reports whether err is a transient storage fault worth retrying later.
func IsTransient(err error) bool { return errors.Is(err, ErrUnavailable) }

var sigRE = regexp.MustCompile(`(?i)(sig=)[^&\s"']+`)

// redactString removes SAS signatures and the given secrets from s.
func redactString(s string, secrets []string) string {
	for _, sec := range secrets {
		if len(sec) >= 4 {
			s = strings.ReplaceAll(s, sec, "REDACTED")
		}
	}
	return sigRE.ReplaceAllString(s, "${1}REDACTED")
}

// wrap turns an SDK error into an *Error.
func (b *Backend) wrap(ctx context.Context, op, qname, msgID string, err error) error {
	e := &Error{Op: op, Queue: qname, MessageID: msgID}
	where := qname
	if msgID != "" {
		where = fmt.Sprintf("%s message %s", qname, msgID)
	}
	var detail string
	var re *azcore.ResponseError
	switch {
	case errors.As(err, &re):
		e.StatusCode, e.Code = re.StatusCode, re.ErrorCode
		detail = fmt.Sprintf("HTTP %d %s", re.StatusCode, re.ErrorCode)
		switch {
		case queueerror.HasCode(err, queueerror.MessageNotFound, queueerror.PopReceiptMismatch):
			e.kinds = append(e.kinds, queue.ErrLeaseLost)
			detail += " (lease lost: the pop receipt is stale or the message is gone)"
		case queueerror.HasCode(err, queueerror.QueueNotFound):
			e.kinds = append(e.kinds, queue.ErrNotFound)
			detail += " (queue does not exist; create it or set Options.CreateQueues)"
		case queueerror.HasCode(err, queueerror.AuthenticationFailed, queueerror.AuthorizationFailure,
			queueerror.AuthorizationPermissionMismatch, queueerror.InvalidAuthenticationInfo):
			detail += " (check the credentials)"
		case transientStatus(re.StatusCode):
			e.kinds = append(e.kinds, ErrUnavailable)
		}
	case ctx.Err() != nil:
		// The caller gave up; not a storage fault.
		e.kinds = append(e.kinds, ctx.Err())
		detail = ctx.Err().Error()
	default:
		if transientTransport(err) {
			e.kinds = append(e.kinds, ErrUnavailable)
		}
		detail = redactString(err.Error(), b.secrets)
	}
	if IsTransient(e) {
		detail += " (storage unavailable, retries exhausted)"
	}
	e.msg = fmt.Sprintf("azure: %s %s: %s", op, where, detail)
	return e
}

func transientStatus(code int) bool {
	switch code {
	case http.StatusRequestTimeout, http.StatusTooManyRequests, http.StatusInternalServerError,
		http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// transientTransport classifies errors that got no HTTP answer. The caller's context is
// still live here, so a deadline is a per-try timeout.
func transientTransport(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, context.DeadlineExceeded)
}
