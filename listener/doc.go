// Package listener runs the auto-scaling batch queue listener: dequeue workers that receive
// leased batches from a queue.Queue, hand each message to a Handler, and settle it (delete,
// release with a delay, or dead-letter) as the configured policies decide.
//
// Which package to read for what:
//   - listener/queue: the contract a queue backend implements (message, Queue, the optional
//     capabilities and their fallbacks, errors). Start there to write a backend or wrapper.
//   - listener/queuetest: the conformance suite a backend or wrapper must pass.
//   - listener/outcome: the one outcome type, how a handler call ended and what a poison
//     policy answers.
//   - listener/memory, local, azure, nats: the backends; listener/sharded: one queue over
//     several.
//   - this package: Config and New/Run to embed a listener, the Handler (or BatchHandler) it
//     calls, and the policies it consults (Backoff, Scaler, PoisonPolicy, with IdleState,
//     State and Failure; built-ins in plugins/builtin). Ordered mode is Config.Ordered.
//
// Settlement: a handler call ends in an outcome.Outcome (done, retry after a delay, reject,
// failed); the host's handler fills it in from the runtime's result, a HandlerFunc from its
// error (outcome.Of). A done message is deleted. Every other outcome goes to the
// PoisonPolicy, which reads it (Failure.Outcome) and answers with another: retry after a
// delay, dead-letter (KindReject, with its reason), or drop.
//
// One place refuses a body by its size: process (settle.go) marks a message whose body is
// above MaxMessageBytes, or was left unread by the backend (queue.Message.Oversize), or
// whose dequeue count is above MaxDequeueCount, as a refusal (a KindReject whose reason is
// the refusal's text) before any handler sees it. One place makes a message poison: fail
// (fail.go) hands every outcome but done, refusals included, to the PoisonPolicy, forces a
// dead letter where a retry would loop (a refusal, at-most-once), and its deadLetter alone
// carries out every dead letter.
//
// The package knows nothing of WebAssembly nor of any backend.
package listener
