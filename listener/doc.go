// Package listener runs the auto-scaling batch queue listener: dequeue workers that receive
// leased batches from a queue.Queue, hand each message to a Handler, and settle it (delete,
// release with a delay, or dead-letter) as the configured policies decide.
//
// Which package to read for what:
//   - listener/queue: the contract a queue backend implements (message, Queue, the optional
//     capabilities and their fallbacks, errors). Start there to write a backend or wrapper.
//   - listener/queuetest: the conformance suite a backend or wrapper must pass.
//   - listener/memory, local, azure: the backends; listener/sharded: one queue over several.
//   - this package: Config and New/Run to embed a listener, the Handler it calls, and the
//     policies it consults (Backoff, Scaler, PoisonPolicy; built-ins in plugins/builtin).
//
// Settlement: a handler call ends in a Verdict (ok, retry after a delay, reject, failed).
// Every verdict but ok goes to the PoisonPolicy, and so do the messages the listener refuses
// unread (a body over MaxMessageBytes, a dequeue count over MaxDequeueCount), as rejects
// carrying the refusal as their reason: the policy is the one place a message becomes
// poison, and one function carries out every dead letter.
//
// The package knows nothing of WebAssembly nor of any backend.
package listener
