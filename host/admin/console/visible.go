package console

import textvis "github.com/wqhost/wqhost/internal/visible"

// visible makes text a guest or a message wrote (a reason, a body, an id, an attribute)
// show every character it holds, as the CLI does (internal/visible.Page).
func visible(s string) string { return textvis.Page(s) }
