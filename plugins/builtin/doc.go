// Package builtin holds wqhost's built-in listener policies, selected by name in config:
//
//   - back-off "random-exponential" (RandomExponential): the whitepaper's random exponential
//     back-off after an empty receive, jittered within its top 10 % once at its maximum,
//     stopping surplus workers once it reaches it;
//   - scalers "depth-table" (DepthTable: the whitepaper's GetOptimalDequeueTaskCount thresholds,
//     configurable) and "target" (Target: KEDA's ceil(depth / target per worker));
//   - poison policy "retry-then-dead-letter" (RetryThenDeadLetter): growing visibility delays,
//     spread ±10 %, until max_dequeue_count, then the <queue>-poison queue.
//
// Every policy is safe for concurrent use by a listener's workers and answers within its own
// bounds whatever the input (negative depths, idle counts in the billions, inverted limits),
// so a listener can use them unguarded and as the fallback of an external plugin.
package builtin
